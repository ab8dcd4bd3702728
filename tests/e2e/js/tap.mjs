// A NATS client we did not write (nats.js from npm) following the README's tap recipes with a
// context file from `wintermute nats-context`. Prints one JSON line per finding.
// Usage: node tap.mjs CONTEXT.json SESSION_SUBJECT
import { readFileSync } from "node:fs";
import { connect, nkeyAuthenticator, StringCodec } from "nats";

const [ctxPath, sessionSubject] = process.argv.slice(2);
const ctx = JSON.parse(readFileSync(ctxPath, "utf8"));
const seed = readFileSync(ctx.nkey, "utf8").trim();
const say = (what, value) => console.log(JSON.stringify({ what, value }));
const sc = StringCodec();

const nc = await connect({
  servers: ctx.url,
  authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
  inboxPrefix: ctx.inbox_prefix,
});
const jsm = await nc.jetstreamManager({ apiPrefix: ctx.jetstream_api_prefix });

// nats sub 'wm.>': wait for one live message.
const sub = nc.subscribe("wm.>", { max: 1 });
say("subscribed", "wm.>");

// nats stream ls
const streams = [];
for await (const name of jsm.streams.names()) streams.push(name);
say("streams", streams);

// nats consumer ls WM_IN
const consumers = [];
for await (const ci of jsm.consumers.list("WM_IN")) consumers.push(ci.name);
say("consumers", consumers);

// nats kv ls
const buckets = [];
for await (const status of jsm.streams.listKvs()) buckets.push(status.bucket);
say("buckets", buckets);

// nats stream get WM_IN / WM_OUT: a session's history, message by message.
const history = [];
for (const stream of ["WM_IN", "WM_OUT"]) {
  const info = await jsm.streams.info(stream);
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    try {
      const m = await jsm.streams.getMessage(stream, { seq });
      if (m.subject === sessionSubject.replace("wm.in", stream === "WM_IN" ? "wm.in" : "wm.out")) {
        history.push({ stream, seq, subject: m.subject, payload: JSON.parse(sc.decode(m.data)) });
      }
    } catch (e) {
      // a deleted message: skip
    }
  }
}
say("history", history);

for await (const m of sub) say("live", m.subject);
await nc.close();
