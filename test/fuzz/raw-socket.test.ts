import net from 'node:net';
import { expect } from 'chai';
import { start as startApi, type ApiServer } from '../../api/app';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { parseRawAnswer, rawExchange } from './raw-http';

/**
 * Bytes Node's HTTP parser refuses never reach Express: the server's 'clientError' handler
 * answers them in the Error shape with a fresh X-Request-Id, then closes the connection.
 */
describe("raw sockets: what Node's HTTP parser refuses still gets the Error shape", () => {
  let stack: Stack;
  let port: number;
  let key: string;
  before(async () => {
    stack = await startStack({ workers: false, scheduler: false });
    port = Number(new URL(stack.baseUrl).port);
    key = (await stack.createAccount()).key;
  });
  after(() => stack.stop());

  const cases: [string, Buffer, number, string][] = [
    [
      'a raw non-ASCII byte in the path',
      Buffer.concat([
        Buffer.from('GET /api/v1/jobs/'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n'),
      ]),
      400,
      'bad_request',
    ],
    [
      'a control byte in the path',
      Buffer.from('GET /api/v1/jobs/\x01 HTTP/1.1\r\nHost: x\r\n\r\n', 'latin1'),
      400,
      'bad_request',
    ],
    [
      'headers over 16 KiB',
      Buffer.from(`GET /api/v1/account HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
      431,
      'headers_too_large',
    ],
    [
      'a header name with a space',
      Buffer.from('GET /api/v1/account HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n'),
      400,
      'bad_request',
    ],
    ['a request line that is not HTTP', Buffer.from('HELLO\r\n\r\n'), 400, 'bad_request'],
    [
      'a Content-Length that is not a number',
      Buffer.from('POST /api/v1/code-builds HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}'),
      400,
      'bad_request',
    ],
    [
      'both Content-Length and chunked',
      Buffer.from(
        'POST /api/v1/code-builds HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}',
      ),
      400,
      'bad_request',
    ],
  ];

  for (const [what, bytes, status, code] of cases) {
    it(`when the request has ${what}, then ${status} ${code} in the Error shape with X-Request-Id`, async () => {
      const answer = parseRawAnswer(await rawExchange(port, bytes));
      expect(answer.status, answer.text).to.equal(status);
      expect(answer.headers['content-type']).to.match(/^application\/json/);
      expect(answer.headers['x-request-id']).to.match(/^req_[0-9a-f]{32}$/);
      expect(answer.body).to.deep.equal({
        error: { code, message: answer.body.error.message, requestId: answer.headers['x-request-id'] },
      });
      expect(answer.body.error.message).to.be.a('string').and.not.equal('');
    });
  }

  it('when a client keeps its side open and trickles bytes after a malformed request, then the server still closes the connection', async () => {
    const { answer, closed } = await trickleAfter(
      port,
      Buffer.from('GET /api/v1/jobs/\x01 HTTP/1.1\r\nHost: x\r\n', 'latin1'),
    );
    expect(parseRawAnswer(answer).status, answer).to.equal(400);
    expect(closed).to.equal(true);
  });

  it("when a request's headers never finish, then 408 request_timeout and the connection is closed although the client keeps trickling", async () => {
    let api: ApiServer | undefined;
    try {
      api = await startApi(stack.config2({ HTTP_HEADERS_TIMEOUT_MS: '400' }));
      const { answer, closed } = await trickleAfter(
        api.port,
        Buffer.from('GET /api/v1/account HTTP/1.1\r\nHost: x\r\n'),
        'X-Slow: 1\r\n',
      );
      const parsed = parseRawAnswer(answer);
      expect(parsed.status, answer).to.equal(408);
      expect(parsed.body.error.code).to.equal('request_timeout');
      expect(closed).to.equal(true);
    } finally {
      await api?.stop();
    }
  });

  it('when those connections are gone, then the service still answers GET /account', async () => {
    expect((await client(stack.baseUrl, key).get('/account')).status).to.equal(200);
  });
});

/**
 * Send `first`, then keep the socket open (no FIN from this side, even after the server's) and
 * write `trickle` every 50 ms until the server closes the connection: resolves with what it
 * answered once the socket is gone; never resolves while the server only half-closes.
 */
function trickleAfter(port: number, first: Buffer, trickle = 'x'): Promise<{ answer: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const chunks: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    s.on('connect', () => {
      s.write(first);
      timer = setInterval(() => s.writable && s.write(trickle), 50);
    });
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', () => {}); // the server's reset to a write after it closed: expected
    s.on('close', () => {
      clearInterval(timer);
      resolve({ answer: Buffer.concat(chunks).toString('utf8'), closed: true });
    });
  });
}
