// An OpenAI Agents SDK agent that agentplane runs as an external agent:
// every completion goes through the run gateway's OpenAI-compatible
// endpoint (the Responses API, or Chat Completions with
// OPENAI_API=chat_completions; streamed with STREAM=1) and every tool call
// through its MCP server.
//
//   npm install && PORT=9100 MODEL=gpt [INSTRUCTIONS=...] node agent.mjs
import http from 'node:http';
import { json } from 'node:stream/consumers';
import {
  Agent,
  MCPServerStreamableHttp,
  OpenAIChatCompletionsModel,
  OpenAIResponsesModel,
  run,
  setTracingDisabled,
} from '@openai/agents';
import OpenAI from 'openai';

// MODEL names one of the models the version may use; INSTRUCTIONS
// replaces the agent's instructions.
const model = process.env.MODEL ?? 'default';
const instructions = process.env.INSTRUCTIONS ?? 'Answer the request; use the tools to look things up.';
const api = process.env.OPENAI_API ?? 'responses';
const stream = process.env.STREAM === '1';
// agentplane records every exchange; the SDK's own traces would go to OpenAI.
setTracingDisabled(true);

async function answer({ goal, context, gateway }) {
  const client = new OpenAI({ baseURL: gateway.openai_base_url, apiKey: gateway.token });
  const mcp = new MCPServerStreamableHttp({
    name: 'agentplane',
    url: gateway.mcp_url,
    requestInit: { headers: { Authorization: `Bearer ${gateway.token}` } },
  });
  await mcp.connect();
  try {
    const agent = new Agent({
      name: 'assistant',
      instructions,
      model:
        api === 'chat_completions'
          ? new OpenAIChatCompletionsModel(client, model)
          : new OpenAIResponsesModel(client, model),
      mcpServers: [mcp],
    });
    const prompt = context && Object.keys(context).length ? `${goal}\n\nContext: ${JSON.stringify(context)}` : goal;
    const result = await run(agent, prompt, { stream });
    await result.completed; // a streamed run ends when its last event has come
    return { answer: result.finalOutput };
  } finally {
    await mcp.close();
  }
}

const server = http.createServer(async (req, res) => {
  const reply = (status, body) =>
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  let payload;
  try {
    payload = await json(req);
  } catch {
    return reply(400, { error: 'the body is not JSON' });
  }
  try {
    reply(200, { output: await answer(payload), outcome: 'answered' });
  } catch (err) {
    const message = err.cause?.message ? `${err.message}: ${err.cause.message}` : err.message;
    console.error(`run ${payload.run?.id} failed: ${message}`);
    reply(500, { error: message });
  }
});
server.listen(Number(process.env.PORT ?? 9100), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
