// An A2A client's push-notification receiver reading a delivery's body
// with the official JS SDK: node a2a_push_receiver.cjs < body; prints the
// StreamResponse's member and, for a task, the task as the SDK reads it.
const { StreamResponse, Task } = require("@a2a-js/sdk");

let body = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { body += chunk; });
process.stdin.on("end", () => {
  const r = StreamResponse.fromJSON(JSON.parse(body));
  const p = r.payload || {};
  console.log(JSON.stringify({ case: p.$case, task: p.$case === "task" ? Task.toJSON(p.value) : null }));
});
