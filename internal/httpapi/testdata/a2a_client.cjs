// A third-party A2A client session against agentplane, with the official
// JS SDK (@a2a-js/sdk). Usage: node a2a_client.cjs '<json args>'; prints
// one JSON line per result for the Go test to check.
const { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } = require("@a2a-js/sdk/client");
const { Task, TaskStatusUpdateEvent, TaskArtifactUpdateEvent } = require("@a2a-js/sdk");

const args = JSON.parse(process.argv[2]);
const authed = (token) => (url, init = {}) =>
  fetch(url, { ...init, headers: { ...(init.headers || {}), Authorization: "Bearer " + token } });
const out = (v) => console.log(JSON.stringify(v));
// taskJSON is the protocol JSON of a SendMessage result or a Task.
const taskJSON = (r) => Task.toJSON(r && r.payload ? r.payload.value : r);

async function client(agent, binding) {
  const fetchImpl = authed(args.token);
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    preferredTransports: [binding],
  }));
  return factory.createFromUrl(args.server + "/a2a/" + agent + "/");
}

const message = (id, text, data) => ({
  message: {
    messageId: id, role: 1 /* ROLE_USER */, contextId: "", taskId: "", extensions: [], referenceTaskIds: [],
    parts: [{ content: { $case: "text", value: text }, filename: "", mediaType: "" },
      ...(data ? [{ content: { $case: "data", value: data }, filename: "", mediaType: "" }] : [])],
  },
});

async function main() {
  // The card, with a token.
  const res = await authed(args.token)(args.server + "/a2a/fraud-triage/.well-known/agent-card.json");
  const card = await res.json();
  out({ step: "card", status: res.status, name: card.name, bindings: card.supportedInterfaces.map((i) => i.protocolBinding) });

  for (const binding of ["JSONRPC", "HTTP+JSON"]) {
    const c = await client("fraud-triage", binding);
    // A blocking message.
    const sent = await c.sendMessage(message("js-block-" + binding, "triage tx-20", { transaction_id: "tx-20" }));
    out({ step: "blocking", binding, task: taskJSON(sent) });
    // A streaming message.
    const events = [];
    for await (const ev of c.sendMessageStream(message("js-stream-" + binding, "triage tx-21", { transaction_id: "tx-21" }))) {
      const p = ev.payload;
      const json = p.$case === "task" ? Task.toJSON(p.value) : p.$case === "statusUpdate" ? TaskStatusUpdateEvent.toJSON(p.value) : TaskArtifactUpdateEvent.toJSON(p.value);
      events.push({ kind: p.$case, event: json });
    }
    out({ step: "stream", binding, events });
  }

  // An approval: INPUT_REQUIRED with the reason, then COMPLETED once an
  // approver has decided through the API.
  const r = await client("refunds", "JSONRPC");
  const waiting = taskJSON(await r.sendMessage(message("js-approve", "refund tx-big", { transaction_id: "tx-big" })));
  out({ step: "input_required", task: waiting });
  // A push-notification config: its token, a Standard Webhooks secret the
  // receiver holds, signs the deliveries.
  const token = "whsec_" + require("crypto").randomBytes(32).toString("base64");
  const cfg = await r.createTaskPushNotificationConfig({ tenant: "", id: "", taskId: waiting.id, url: args.hook, token });
  const listed = await r.listTaskPushNotificationConfig({ tenant: "", taskId: waiting.id, pageSize: 0, pageToken: "" });
  out({ step: "push_config", id: cfg.id, task_id: cfg.taskId, url: cfg.url, token, listed: listed.configs.length });
  const decided = await authed(args.approver)(args.server + "/v1/workflows/" + waiting.id + "/approvals/refund_approval", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ decision: "approve" }) });
  let task;
  for (let i = 0; i < 200; i++) {
    task = Task.toJSON(await r.getTask({ id: waiting.id, tenant: "" }));
    if (task.status.state !== "TASK_STATE_INPUT_REQUIRED" && task.status.state !== "TASK_STATE_WORKING") break;
    await new Promise((ok) => setTimeout(ok, 25));
  }
  out({ step: "approved", decision_status: decided.status, task });

  // Cancel a task waiting at its approval, over HTTP+JSON.
  const rest = await client("refunds", "HTTP+JSON");
  const m = message("js-cancel", "refund tx-big", { transaction_id: "tx-big" });
  m.configuration = { acceptedOutputModes: [], returnImmediately: true };
  const started = taskJSON(await rest.sendMessage(m));
  for (let i = 0; i < 200; i++) {
    const t = Task.toJSON(await rest.getTask({ id: started.id, tenant: "" }));
    if (t.status.state === "TASK_STATE_INPUT_REQUIRED") break;
    await new Promise((ok) => setTimeout(ok, 25));
  }
  const cancelled = Task.toJSON(await rest.cancelTask({ id: started.id, tenant: "" }));
  out({ step: "cancel", task: cancelled });
}

main().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
