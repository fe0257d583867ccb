import dns from 'node:dns';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import sinon from 'sinon';
import net from 'node:net';
import { addressProblem, assertFetchable, fetchInput, guardedFetch, InputFetchError } from '../../platform/infra/ssrf';

describe('SSRF guard', () => {
  afterEach(() => sinon.restore());

  it('when an address is private, loopback, link-local, metadata, NAT64 or IPv4-mapped, then it is refused', () => {
    for (const a of [
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '127.0.0.1',
      '::1',
      'fe80::1',
      'fd00::1',
      'fd00:ec2::254',
      '::ffff:10.0.0.1',
      '64:ff9b::a9fe:a9fe',
      '::a9fe:a9fe',
    ]) {
      expect(addressProblem(a), a).to.be.a('string');
    }
    for (const a of ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'])
      expect(addressProblem(a), a).to.equal(null);
    expect(addressProblem('127.0.0.1', { allowLoopback: true })).to.equal(null);
  });

  it('when an address is an IPv6 transition form, then it is refused whatever it embeds, loopback allowed or not', () => {
    for (const a of [
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:8.8.8.8',
      '::ffff:5db8:d822', // IPv4-mapped ::ffff:0:0/96
      '::ffff:0:7f00:1',
      '::ffff:0:808:808', // IPv4-translated ::ffff:0:0:0/96
      '64:ff9b::7f00:1',
      '64:ff9b::808:808', // NAT64 64:ff9b::/96
      '64:ff9b:1::a9fe:a9fe',
      '64:ff9b:1:ffff::1', // local-use NAT64 64:ff9b:1::/48
      '2002:7f00:1::1',
      '2002:808:808::1', // 6to4 2002::/16
      '2001:0:4136:e378:8000:63bf:3fff:fdd2',
      '2001:0:ffff::1', // Teredo 2001::/32
      '100::1',
      '100::ffff:ffff:ffff:ffff', // discard-only 100::/64
    ]) {
      expect(addressProblem(a), a).to.match(/^reserved IPv6 transition address/);
      expect(addressProblem(a, { allowLoopback: true }), a).to.match(/^reserved IPv6 transition address/);
    }
    // The neighbours of those ranges stay public.
    for (const a of ['2001:1::1', '2001:4860:4860::8888', '64:ff9b:2::1', '100:0:0:1::1', '2003::1'])
      expect(addressProblem(a), a).to.equal(null);
  });

  it('when a URL names an IPv6 transition host in brackets, then assertFetchable refuses it', async () => {
    for (const url of [
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:0:7f00:1]/',
      'https://[2002:a9fe:a9fe::]/',
      'https://[64:ff9b:1::a9fe:a9fe]/',
    ]) {
      const err = await assertFetchable(url, 'imageUrl', { allowLoopback: true }).catch((e) => e);
      expect(err.code, url).to.equal('validation_error');
      expect(err.message, url).to.match(/^imageUrl: .* resolves to a reserved IPv6 transition address/);
    }
  });

  it('when a URL is not http(s), carries credentials or resolves privately, then 400 names the field', async () => {
    for (const [url, text] of [
      ['ftp://example.com/x', 'must be an http(s) URL'],
      ['https://user:pw@example.com/x', 'must not carry credentials'],
      ['http://169.254.169.254/latest/meta-data', 'private, link-local or reserved'],
      ['http://[::1]/', 'loopback'],
    ] as const) {
      const err = await assertFetchable(url, 'imageUrl').catch((e) => e);
      expect(err.code, url).to.equal('validation_error');
      expect(err.message, url).to.include('imageUrl: ').and.include(text);
    }
  });

  it('when DNS answers a public address at the check and a private one at connect time (rebinding), then the fetch is refused', async () => {
    const lookup = sinon.stub(dns.promises, 'lookup');
    lookup.onFirstCall().resolves([{ address: '93.184.216.34', family: 4 }] as never);
    lookup.resolves([{ address: '10.0.0.7', family: 4 }] as never);
    const err = await guardedFetch('http://rebind.example/x', 'brandUrl').catch((e) => e);
    expect(err.code).to.equal('validation_error');
    expect(err.message).to.equal(
      'brandUrl: rebind.example resolves to a private, link-local or reserved address, which the server will not fetch',
    );
  });

  it('when a fetched page redirects to a private address, then the hop is refused', async () => {
    const server = http.createServer((_req, res) => res.writeHead(302, { location: 'http://10.0.0.1/admin' }).end());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/start`;
      const err = await guardedFetch(url, 'brandUrl', {}, { allowLoopback: true }).catch((e) => e);
      expect(err.message).to.match(/^brandUrl: 10\.0\.0\.1 resolves to a private/);
      const ok = await guardedFetch(url.replace('/start', '/x'), 'brandUrl', {}, { allowLoopback: true }).catch(
        (e) => e,
      );
      expect(ok.message).to.include('10.0.0.1');
    } finally {
      server.close();
    }
  });

  it('when a loopback server answers, then guardedFetch returns its body and status', async () => {
    const server = http.createServer((_req, res) => res.writeHead(201, { 'content-type': 'text/plain' }).end('hello'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const res = await guardedFetch(
        `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
        'url',
        {},
        { allowLoopback: true },
      );
      expect(res.status).to.equal(201);
      expect(res.headers.get('content-type')).to.equal('text/plain');
      expect(await res.text()).to.equal('hello');
    } finally {
      server.close();
    }
  });

  it('when an input URL never answers, refuses the connection or answers an error status, then fetchInput names the field and the cause', async () => {
    const silent = net.createServer((sock) => sock.on('error', () => {}));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const answering = http.createServer((req, res) =>
      req.url === '/missing' ? res.writeHead(404).end() : res.end('0123456789'),
    );
    await new Promise<void>((r) => answering.listen(0, '127.0.0.1', r));
    const opts = {
      allowLoopback: true,
      signal: new AbortController().signal,
      answerMs: 200,
      totalMs: 5_000,
      maxBytes: 1024,
    };
    try {
      const at = (s: net.Server, p = '/x') => `http://127.0.0.1:${(s.address() as AddressInfo).port}${p}`;
      const hung = await fetchInput(at(silent), 'imageUrl', opts).catch((e) => e);
      expect(hung).to.be.instanceOf(InputFetchError);
      expect(hung.message).to.equal('imageUrl: no answer within 0.2 s');
      const closedPort = at(silent).replace(/:\d+\//, ':1/');
      expect((await fetchInput(closedPort, 'videoUrl', opts).catch((e) => e)).message).to.equal(
        'videoUrl: could not be fetched (connection refused)',
      );
      const missing = await fetchInput(at(answering, '/missing'), 'openingFrameUrl', opts).catch((e) => e);
      expect([missing.code, missing.message]).to.deep.equal([
        'validation_error',
        'openingFrameUrl: could not be fetched (HTTP 404)',
      ]);
      const big = await fetchInput(at(answering), 'brandUrl', { ...opts, maxBytes: 4 }).catch((e) => e);
      expect(big.message).to.equal('brandUrl: larger than 4 bytes');
      expect((await fetchInput(at(answering), 'brandUrl', opts)).toString()).to.equal('0123456789');
    } finally {
      silent.close();
      answering.close();
    }
  });
});
