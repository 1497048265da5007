// A Vercel AI SDK agent that agentplane runs as an external agent: every
// completion goes through the run gateway's Anthropic-compatible endpoint
// and every tool call through its MCP server.
//
//   npm install && PORT=9100 MODEL=claude [INSTRUCTIONS=...] node agent.mjs
import http from 'node:http';
import { json } from 'node:stream/consumers';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createMCPClient } from '@ai-sdk/mcp';
import { generateText, isStepCount } from 'ai';

// MODEL names one of the models the version may use; INSTRUCTIONS, when
// set, is the system prompt.
const model = process.env.MODEL ?? 'default';
const instructions = process.env.INSTRUCTIONS;

async function answer({ goal, context, gateway }) {
  // The AI SDK's Anthropic base URL includes the API version.
  const anthropic = createAnthropic({ baseURL: `${gateway.anthropic_base_url}/v1`, apiKey: gateway.token });
  const mcp = await createMCPClient({
    transport: { type: 'http', url: gateway.mcp_url, headers: { Authorization: `Bearer ${gateway.token}` } },
  });
  try {
    const { text } = await generateText({
      model: anthropic(model),
      system: instructions,
      tools: await mcp.tools(),
      stopWhen: isStepCount(10),
      maxOutputTokens: 4096,
      prompt: context && Object.keys(context).length ? `${goal}\n\nContext: ${JSON.stringify(context)}` : goal,
    });
    return { answer: text };
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
