// Drives "markov mcp" with the official TypeScript MCP client v1
// (@modelcontextprotocol/sdk, protocol 2025-11-25: no multi round-trip
// requests) over stdio, where the Go SDK's shim asks it with
// elicitation/create during the call, and over stateless Streamable
// HTTP, where it cannot be asked. Prints what it saw as one JSON object.
// Arguments: the markov binary, a database file, the URL of a
// "markov mcp --http".
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [bin, db, url] = process.argv.slice(2);
const env = { ...process.env, MARKOV_CHARTER: 'acpdemo', MARKOV_MCP_SECRET: 'a-test-secret-of-at-least-32-bytes!!' };
const out = {};
const text = r => (r.content ?? []).map(c => c.text).join('');

const stdio = new Client({ name: 'ts-v1', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
const asked = [];
stdio.setRequestHandler(ElicitRequestSchema, async req => {
    asked.push({ message: req.params.message, schema: req.params.requestedSchema });
    return { action: 'accept', content: { approved: true, manager: 'ts-v1' } };
});
await stdio.connect(new StdioClientTransport({ command: bin, args: ['mcp', '--db', db], env, stderr: 'inherit' }));
const r = await stdio.callTool({ name: 'send_message', arguments: { message: 'refund 7', conversation: 'v1' } });
out.stdio = { text: text(r), asked };
await stdio.close();

const http = new Client({ name: 'ts-v1', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
http.setRequestHandler(ElicitRequestSchema, async () => { throw new Error('asked over stateless HTTP'); });
await http.connect(new StreamableHTTPClientTransport(new URL(url)));
const w = await http.callTool({ name: 'send_message', arguments: { message: 'ask what color?', conversation: 'v1-http' } });
out.http = { text: text(w), structured: w.structuredContent, isError: w.isError ?? false };
await http.close();
console.log(JSON.stringify(out));
