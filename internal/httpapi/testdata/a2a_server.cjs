// A remote A2A agent served by the official JS SDK (@a2a-js/sdk, express),
// for the tests of tools of type a2a. Skills: "greet" completes with a data
// artifact; "ask" stops at TASK_STATE_INPUT_REQUIRED. Prints "listening
// <port>"; GET /requests answers how many A2A requests it has had.
const express = require("express");
const { DefaultRequestHandler, InMemoryTaskStore, AgentEvent } = require("@a2a-js/sdk/server");
const { jsonRpcHandler, UserBuilder } = require("@a2a-js/sdk/server/express");
const { AgentCard, TaskState } = require("@a2a-js/sdk");

let requests = 0;
const app = express();
const server = app.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  const url = `http://127.0.0.1:${port}/a2a`;
  const cardJSON = {
    name: "greeter", description: "Greets whom it is told to", version: "1.0.0",
    supportedInterfaces: [{ url, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
    capabilities: { streaming: false, pushNotifications: false },
    defaultInputModes: ["text/plain", "application/json"], defaultOutputModes: ["application/json"],
    skills: [
      { id: "greet", name: "Greet someone", description: "Answers with a greeting as data.", tags: ["greeting"] },
      { id: "ask", name: "Ask back", description: "Always asks for more input.", tags: ["question"] },
    ],
  };
  const executor = {
    async execute(ctx, bus) {
      const msg = ctx.userMessage;
      const text = msg.parts.filter((p) => p.content?.$case === "text").map((p) => p.content.value).join(" ");
      const data = msg.parts.find((p) => p.content?.$case === "data")?.content.value || {};
      const skill = ctx.request.metadata?.skill;
      const ts = new Date().toISOString();
      const agentText = (t) => ({ messageId: ctx.taskId + "-m", contextId: ctx.contextId, taskId: ctx.taskId, role: 2,
        parts: [{ content: { $case: "text", value: t }, filename: "", mediaType: "" }], extensions: [], referenceTaskIds: [] });
      if (skill === "ask") {
        bus.publish(AgentEvent.task({ id: ctx.taskId, contextId: ctx.contextId, history: [msg], artifacts: [],
          status: { state: TaskState.TASK_STATE_INPUT_REQUIRED, message: agentText("which language?"), timestamp: ts } }));
      } else {
        bus.publish(AgentEvent.task({ id: ctx.taskId, contextId: ctx.contextId, history: [msg],
          status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: ts },
          artifacts: [{ artifactId: "greeting", name: "greeting", description: "", extensions: [],
            parts: [{ content: { $case: "data", value: { greeting: "hello " + (data.name || text) } }, filename: "", mediaType: "" }] }] }));
      }
      bus.finished();
    },
    async cancelTask() {},
  };
  const handler = new DefaultRequestHandler(AgentCard.fromJSON(cardJSON), new InMemoryTaskStore(), executor);
  app.get("/requests", (req, res) => res.json({ requests }));
  app.get("/.well-known/agent-card.json", (req, res) => { requests++; res.json(cardJSON); });
  app.use("/a2a", (req, res, next) => { requests++; next(); }, jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  console.log("listening " + port);
});
