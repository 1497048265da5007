// A LangGraph.js agent that agentplane runs as an external agent: every
// completion goes through the run gateway's OpenAI-compatible endpoint and
// every tool call through its MCP server.
//
//   npm install && PORT=9100 MODEL=gpt [INSTRUCTIONS=...] node agent.mjs
import http from 'node:http';
import { json } from 'node:stream/consumers';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { MultiServerMCPClient } from '@langchain/mcp-adapters';
import { ChatOpenAI } from '@langchain/openai';

// MODEL names one of the models the version may use; INSTRUCTIONS, when
// set, is the system prompt.
const model = process.env.MODEL ?? 'default';
const instructions = process.env.INSTRUCTIONS;

async function answer({ goal, context, gateway }) {
  const mcp = new MultiServerMCPClient({
    mcpServers: {
      agentplane: {
        transport: 'http',
        url: gateway.mcp_url,
        headers: { Authorization: `Bearer ${gateway.token}` },
        automaticSSEFallback: false,
      },
    },
  });
  try {
    const agent = createReactAgent({
      llm: new ChatOpenAI({ model, apiKey: gateway.token, configuration: { baseURL: gateway.openai_base_url } }),
      tools: await mcp.getTools(),
      prompt: instructions,
    });
    const prompt = context && Object.keys(context).length ? `${goal}\n\nContext: ${JSON.stringify(context)}` : goal;
    const { messages } = await agent.invoke({ messages: [{ role: 'user', content: prompt }] });
    return { answer: messages.at(-1).text };
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
