// Drives "markov mcp" with the official TypeScript MCP client (v2, the
// 2026-07-28 protocol) over stdio and over Streamable HTTP, and prints
// what it saw as one JSON object. Arguments: the markov binary, a
// database file, and the base URL of a "markov mcp --http" on another
// database.
import { Client, isInputRequiredResult } from '@modelcontextprotocol/client';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const [bin, db, url] = process.argv.slice(2);
const env = { ...process.env, MARKOV_CHARTER: 'acpdemo', MARKOV_MCP_SECRET: 'a-test-secret-of-at-least-32-bytes!!' };
const out = {};
let asked; // the last message the auto client's elicitation handler saw

function newClient(auto) {
    const c = new Client({ name: 'ts-e2e', version: '1.0.0' }, {
        capabilities: { elicitation: { form: {} } },
        versionNegotiation: { mode: { pin: '2026-07-28' } },
        inputRequired: { autoFulfill: auto },
    });
    if (auto) {
        c.setRequestHandler('elicitation/create', async req => {
            asked = req.params.message;
            return { action: 'accept', content: { text: 'purple' } };
        });
    }
    return c;
}

const only = r => Object.entries(r.inputRequests);
const text = r => (r.content ?? []).map(c => c.text).join('');

// Manual mode: see input_required, answer badly, then well; tamper.
async function manual(client, key) {
    const res = {};
    const tools = await client.listTools();
    res.tools = tools.tools.map(t => t.name);
    const hello = await client.callTool({ name: 'send_message', arguments: { message: 'hello there', conversation: key } });
    res.hello = { text: text(hello), machineId: hello.structuredContent?.machine_id };
    const args = { message: 'refund 42', conversation: key };
    const first = await client.callTool({ name: 'send_message', arguments: args }, { allowInputRequired: true });
    res.inputRequired = isInputRequiredResult(first);
    const [[id, ask]] = only(first);
    res.ask = { method: ask.method, message: ask.params.message, schema: ask.params.requestedSchema };
    const bad = await client.callTool({ name: 'send_message', arguments: args, requestState: first.requestState,
        inputResponses: { [id]: { action: 'accept', content: { approved: 'yes', manager: 'ts-e2e' } } } }, { allowInputRequired: true });
    res.bad = { inputRequired: isInputRequiredResult(bad), message: bad.inputRequests?.[id]?.params?.message };
    try {
        await client.callTool({ name: 'send_message', arguments: args, requestState: bad.requestState.slice(0, -2) + 'xx',
            inputResponses: { [id]: { action: 'accept', content: { approved: true, manager: 'ts-e2e' } } } });
        res.tampered = 'accepted';
    } catch (e) {
        res.tampered = { code: e.code, message: e.message };
    }
    const good = await client.callTool({ name: 'send_message', arguments: args, requestState: bad.requestState,
        inputResponses: { [id]: { action: 'accept', content: { approved: true, manager: 'ts-e2e' } } } }, { allowInputRequired: true });
    res.good = { inputRequired: isInputRequiredResult(good), text: text(good) };
    return res;
}

// Auto mode: the client answers from its elicitation handler.
async function auto(client, key) {
    const r = await client.callTool({ name: 'send_message', arguments: { message: 'ask what color?', conversation: key } });
    return { text: text(r), asked };
}

async function run(kind, transport) {
    const m = newClient(false);
    await m.connect(transport());
    out[kind] = await manual(m, kind);
    await m.close();
    const a = newClient(true);
    await a.connect(transport());
    out[kind].auto = await auto(a, kind + '-auto');
    await a.close();
}

await run('stdio', () => new StdioClientTransport({ command: bin, args: ['mcp', '--db', db], env, stderr: 'inherit' }));
await run('http', () => new StreamableHTTPClientTransport(new URL(url)));
console.log(JSON.stringify(out));
