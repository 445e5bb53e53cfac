// The webhook package's tests drive the Standard Webhooks reference
// library through this script. It reads one JSON request on stdin and
// writes one JSON answer on stdout:
//   {"op":"sign","secret":"whsec_…","id":"msg_1","timestamp":1700000000,"body":"…"}
//     → {"signature":"v1,…"}
//   {"op":"verify","secret":"whsec_…","headers":{…},"body":"…"}
//     → {"ok":true,"payload":…} or {"ok":false,"error":"…"}
import { Webhook } from "standardwebhooks";

let input = "";
process.stdin.setEncoding("utf8");
for await (const chunk of process.stdin) input += chunk;
const req = JSON.parse(input);
const wh = new Webhook(req.secret);
let out;
if (req.op === "sign") {
  out = { signature: wh.sign(req.id, new Date(req.timestamp * 1000), req.body) };
} else {
  try {
    out = { ok: true, payload: wh.verify(req.body, req.headers) };
  } catch (e) {
    out = { ok: false, error: String(e.message ?? e) };
  }
}
process.stdout.write(JSON.stringify(out));
