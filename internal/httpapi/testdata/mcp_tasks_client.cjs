// A third-party MCP client session against agentplane, with the official
// TypeScript SDK (@modelcontextprotocol/sdk): the server card, then
// agent_<name> calls as tasks (the SDK's tasks, revision 2025-11-25).
// Usage: node mcp_tasks_client.cjs '<json args>'; prints one JSON line per
// event for the Go test to check.
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { CallToolResultSchema } = require("@modelcontextprotocol/sdk/types.js");

const args = JSON.parse(process.argv[2]);
const out = (v) => console.log(JSON.stringify(v));

async function main() {
  // The card, read before connecting, names the endpoint.
  const card = await (await fetch(args.server + "/.well-known/mcp/server-card.json")).json();
  out({ event: "card", card });
  const client = new Client({ name: "tasks-test", version: "1.0.0" }, { defaultTaskPollInterval: 100 });
  await client.connect(new StreamableHTTPClientTransport(new URL(card.remotes[0].url), {
    requestInit: { headers: { Authorization: "Bearer " + args.token } },
  }));
  out({ event: "capabilities", capabilities: client.getServerCapabilities() });
  const tools = await client.listTools();
  out({ event: "tools", tools: tools.tools.map((t) => ({ name: t.name, execution: t.execution })) });

  // run streams a task-augmented call and prints what it yields; onStatus
  // runs on each status polled.
  async function run(label, tx, onStatus) {
    const stream = client.experimental.tasks.callToolStream(
      { name: "agent_refunds", arguments: { goal: "refund", context: { transaction_id: tx } } },
      CallToolResultSchema, { task: { ttl: 60000 } });
    for await (const msg of stream) {
      if (msg.type === "taskCreated") out({ event: "created", label, task: msg.task });
      if (msg.type === "taskStatus") {
        out({ event: "status", label, task: msg.task });
        if (onStatus) await onStatus(msg.task);
      }
      if (msg.type === "result") out({ event: "result", label, result: msg.result });
      if (msg.type === "error") out({ event: "error", label, message: String(msg.error && msg.error.message) });
    }
  }

  // Completes: no approval for a small refund.
  await run("small", "t-small");

  // Waits for an approval: input_required, then the SDK blocks on
  // tasks/result while the approver decides through the REST API.
  await run("big", "t-big", async (task) => {
    if (task.status !== "input_required") return;
    const r = await fetch(`${args.server}/v1/workflows/${task.taskId}/approvals/2`, {
      method: "POST",
      headers: { Authorization: "Bearer " + args.approver, "Content-Type": "application/json" },
      body: JSON.stringify({ decision: "approve" }),
    });
    out({ event: "approved", status: r.status });
  });

  // Cancelled: started, seen waiting, cancelled, then polled.
  const created = await client.request(
    { method: "tools/call", params: { name: "agent_refunds", arguments: { goal: "refund", context: { transaction_id: "t-big" } }, task: { ttl: 60000 } } },
    require("@modelcontextprotocol/sdk/types.js").CreateTaskResultSchema);
  const id = created.task.taskId;
  let task;
  for (let i = 0; i < 200; i++) {
    task = await client.experimental.tasks.getTask(id);
    if (task.status !== "working") break;
    await new Promise((r) => setTimeout(r, 50));
  }
  out({ event: "before-cancel", task });
  out({ event: "cancel", task: await client.experimental.tasks.cancelTask(id) });
  out({ event: "after-cancel", task: await client.experimental.tasks.getTask(id) });
  const listed = await client.experimental.tasks.listTasks();
  out({ event: "list", ids: listed.tasks.map((t) => t.taskId) });
  await client.close();
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
