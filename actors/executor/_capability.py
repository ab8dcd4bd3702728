"""The executor's side of capability tokens (seed 003 §4.6, invariant J) and template
ceilings (invariant G).

A call runs only with a token the planner signed for exactly this request, tool, arguments and
reply sink, not expired, whose template is the one this executor derives for the call's
principal itself (so the planner cannot widen a turn), which allows the tool, and whose
sinks and data ceiling are that template's own. A result labelled above the template's data
ceiling is withheld (no read up). Every refusal is audited.
"""

from __future__ import annotations

import time
from typing import Any

from contracts import ToolRequest, labels, templates
from kit import capability

#: Calls that reach the executor only through the owner's approval of a request another actor
#: made without a turn (the heartbeat's monthly tool review): the owner's yes is their token.
OWNER_APPROVED_SYSTEM_CALLS = frozenset({"archive_tools"})
#: Principal kinds that may carry the owner's authority (as actors/planner/principals.py).
OWNER_KINDS = ("owner", "cron", "event", "")


class CapabilityGate:
    """Mixed into ExecutorActor."""

    _cap_key: bytes | None = None

    def _capability_problem(self: Any, req: ToolRequest, *, approved: bool = False) -> str:
        """Why this call may not run under its token, or ""."""
        cap = req.capability
        if cap is None:
            if approved and req.name in OWNER_APPROVED_SYSTEM_CALLS:
                return ""
            return (f"Refused {req.name}: the request carries no capability token, so nothing "
                    "shows that a turn's template allows it.")
        if self._cap_key is None:
            self._cap_key = capability.load_key(self.home)
        if not capability.genuine(self._cap_key, cap):
            return f"Refused {req.name}: its capability token is not genuine (bad signature)."
        reply_to = "" if req.reply_to is None else str(req.reply_to)
        bound = (cap.request, cap.tool, cap.session, cap.turn_id, cap.principal, cap.args,
                 cap.reply_to)
        if bound != (req.id, req.name, req.session, req.turn_id, req.principal,
                     capability.digest(req.arguments), reply_to):
            return (f"Refused {req.name}: its capability token was issued for a different call "
                    "(request, tool, arguments or sink).")
        if not approved and time.time() > cap.expires_at:
            return f"Refused {req.name}: its capability token expired."
        problem: str = self._template_problem(req)
        return problem

    def _template_problem(self: Any, req: ToolRequest) -> str:
        cap = req.capability
        assert cap is not None
        owners = set(self.config.owner.principals)
        if req.is_owner and (cap.principal_kind not in OWNER_KINDS or (
                cap.principal_kind == "owner" and cap.principal not in owners)):
            return (f"Refused {req.name}: a {cap.principal_kind} principal ({cap.principal}) "
                    "claimed the owner's authority.")
        configured = self.config.privacy.templates
        if cap.principal_kind == "event":  # continues its session's template
            expected = cap.template if cap.template in templates.merged(configured) else ""
        else:
            expected = templates.choose(cap.principal, cap.principal_kind, req.is_owner,
                                        configured)
        if cap.template != expected:
            return (f"Refused {req.name}: its token names task template {cap.template!r}, but "
                    f"a turn of {cap.principal or 'this principal'} runs under {expected or 'none'!r}.")
        template = templates.get(expected, configured)
        if not template.allows_tool(req.name):
            return f"Refused {req.name}: task template {expected!r} does not allow it."
        if cap.sinks != template.sinks or cap.ceiling != template.data_ceiling:
            return (f"Refused {req.name}: its token widens task template {expected!r} (sinks or "
                    "data ceiling).")
        sink = req.arguments.get("sink")
        if isinstance(sink, str) and sink.strip() and not template.allows_sink(
                sink.strip(), cap.reply_to):
            return (f"Refused {req.name}: task template {expected!r} may not write to "
                    f"{sink.strip()}.")
        return ""

    async def _read_up(self: Any, req: ToolRequest, label: str) -> str:
        """A sentence withholding a result labelled above the call's data ceiling, or ""."""
        cap = req.capability
        if cap is None or labels.dominates(cap.ceiling, label):
            return ""
        why = (f"Withheld the result of {req.name}: it is labelled {label}, above what this "
               f"conversation may read (task template {cap.template}: {cap.ceiling}).")
        await self.audit_decision("read.denied", "refused", why, about=req.id,
                                  principal=req.principal, session=req.session,
                                  refs={"tool": req.name, "label": label,
                                        "ceiling": cap.ceiling, "template": cap.template})
        return why
