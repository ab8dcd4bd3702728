"""Count lines, words and characters of a workspace file; prints one JSON object."""

import json
import sys
from pathlib import Path

if len(sys.argv) != 2:
    sys.exit("usage: count.py PATH (relative to the workspace)")
path = Path(sys.argv[1])
if not path.is_file():
    sys.exit(f"{path} does not exist in the workspace")
text = path.read_text(errors="replace")
print(json.dumps({"file": str(path), "lines": len(text.splitlines()),
                  "words": len(text.split()), "characters": len(text)}))
