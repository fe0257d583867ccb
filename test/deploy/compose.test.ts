import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parse, parseAllDocuments } from 'yaml';
import { POOL_TYPES } from '../../contracts/registry';
import { ConfigSchema, loadConfig } from '../../platform/infra/config';
import { deployDir, run, tool } from './deploy-files';

interface Service {
  image?: string;
  hostname?: string;
  command?: string[] | string;
  environment?: Record<string, string>;
  deploy?: { replicas?: number | string };
  stop_grace_period?: string;
  volumes?: string[];
  networks?: Record<string, { aliases?: string[] }>;
  network_mode?: string;
  entrypoint?: string[];
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
}

const composeFile = path.join(deployDir, 'compose.yaml');
/** What an operator exports before `up` (compose refuses to start without them). */
const secrets = {
  ASSET_SIGNING_SECRET: 'a'.repeat(32),
  WEBHOOK_SECRET_KEY: 'w'.repeat(32),
  RABBITMQ_PASSWORD: 'p4ss',
  RABBITMQ_ERLANG_COOKIE: 'cookie',
  MONGO_ROOT_PASSWORD: 'r00t',
  MONGO_PASSWORD: 'm0ng0',
};
/** Compose's `${VAR:?message}` / `${VAR:-default}`, resolved the way compose does it. */
const interpolate = (value: string, env: Record<string, string>) =>
  value.replace(
    /\$\{(\w+)(?::([?-])([^}]*))?\}/g,
    (_m, name: string, op?: string, rest?: string) => env[name] ?? (op === '-' ? rest! : ''),
  );

const services = (parse(readFileSync(composeFile, 'utf8'), { merge: true }) as { services: Record<string, Service> })
  .services;
const appServices = ['api', 'scheduler', ...POOL_TYPES.map((p) => `worker-${p}`)];
const rawComposeText = readFileSync(composeFile, 'utf8');
/** SHUTDOWN_GRACE_MS of a pool's Kubernetes Deployment (k8s/pools/<pool>.yaml), which compose must match. */
const k8sShutdownGrace = (pool: string) => {
  const docs = parseAllDocuments(readFileSync(path.join(deployDir, 'k8s/pools', `${pool}.yaml`), 'utf8')).map(
    (d) => d.toJS() as { kind: string; spec: any },
  );
  const env = docs.find((d) => d.kind === 'Deployment')!.spec.template.spec.containers[0].env as {
    name: string;
    value: string;
  }[];
  return env.find((e) => e.name === 'SHUTDOWN_GRACE_MS')?.value;
};
const envOf = (name: string) =>
  Object.fromEntries(
    Object.entries(services[name]!.environment ?? {}).map(([k, v]) => [k, interpolate(String(v), secrets)]),
  );

describe('deploy/compose.yaml', () => {
  it('when docker-compose validates the file, then it passes `config -q`', function () {
    const compose = tool('docker-compose');
    if (!compose) {
      console.log('      docker-compose is not installed (scripts/services.sh installs it): skipped');
      this.skip();
    }
    run(compose, ['-f', composeFile, 'config', '-q'], { cwd: deployDir, env: secrets });
  });

  it('when the services are listed, then there are three MongoDB members and their initiator, three RabbitMQ nodes, the API, the scheduler, one worker per pool and Prometheus', () => {
    expect(Object.keys(services).sort()).to.deep.equal(
      [
        'mongo1',
        'mongo2',
        'mongo3',
        'mongo-keyfile',
        'mongo-init',
        'rabbitmq1',
        'rabbitmq2',
        'rabbitmq3',
        'prometheus',
        ...appServices,
      ].sort(),
    );
    for (const pool of POOL_TYPES) {
      const env = envOf(`worker-${pool}`);
      expect(loadConfig(env).WORKER_POOLS, pool).to.deep.equal([pool]);
      expect(services[`worker-${pool}`]!.command).to.deep.equal(['dist/workers/main.js']);
    }
    expect(services.api!.command).to.deep.equal(['dist/api/main.js']);
    expect(services.scheduler!.command).to.deep.equal(['dist/scheduler/main.js']);
    expect(Number(interpolate(String(services.api!.deploy!.replicas), {}))).to.be.greaterThan(1);
  });

  it('when the data services start, then MongoDB is one replica set of three and RabbitMQ one cluster of three sharing a cookie', () => {
    const init = (services['mongo-init']!.command as string[]).join(' ');
    for (const n of [1, 2, 3]) {
      expect(services[`mongo${n}`]!.image).to.equal('mongo:7');
      expect(services[`mongo${n}`]!.command).to.include.members(['--replSet', 'rs0']);
      expect(init).to.include(`host: 'mongo${n}:27017'`);
      const rabbit = services[`rabbitmq${n}`]!;
      expect(rabbit.hostname).to.equal(`rabbitmq${n}`);
      expect(rabbit.networks!.default!.aliases).to.include('rabbitmq');
      expect(rabbit.volumes!.some((v) => v.startsWith('./rabbitmq/rabbitmq.conf:'))).to.equal(true);
      expect(rabbit.volumes!.some((v) => v.startsWith('./rabbitmq/enabled_plugins:'))).to.equal(true);
      expect(rabbit.environment!.RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS).to.include('-setcookie ${RABBITMQ_ERLANG_COOKIE');
    }
    expect(init).to.include("rs.initiate({ _id: 'rs0'");
  });

  it('when MongoDB starts, then access control is on: members share a generated keyFile, and a root and an app user are made from the environment', () => {
    const keyfile = services['mongo-keyfile']!;
    const script = (keyfile.command as string[]).join(' ');
    expect(keyfile.volumes).to.deep.equal(['mongo-keyfile:/keys']);
    // Made once, kept across restarts, owned by mongod's user and readable by it alone.
    expect(script).to.match(
      /^test -s \/keys\/keyfile \|\| head -c \d+ \/dev\/urandom \| base64 -w 0 > \/keys\/keyfile;/,
    );
    expect(script).to.include('chown 999:999 /keys/keyfile && chmod 400 /keys/keyfile');
    for (const n of [1, 2, 3]) {
      const member = services[`mongo${n}`]!;
      expect((member.command as string[]).join(' ')).to.include('--keyFile /keys/keyfile');
      expect(member.volumes).to.include('mongo-keyfile:/keys:ro');
      expect(member.depends_on!['mongo-keyfile']).to.deep.equal({ condition: 'service_completed_successfully' });
    }
    const init = services['mongo-init']!;
    // On mongo1's localhost: the localhost exception lets it create the first user.
    expect(init.network_mode).to.equal('service:mongo1');
    expect((init.command as string[]).slice(0, 3)).to.deep.equal(['mongosh', '--host', '127.0.0.1']);
    const js = (init.command as string[]).at(-1)!;
    expect(js).to.include("admin.createUser({ user: 'root', pwd: rootPwd, roles: ['root'] })");
    expect(js).to.include(
      "app.createUser({ user: 'svc', pwd: process.env.MONGO_PASSWORD, roles: [{ role: 'readWrite', db: 'svc' }, { role: 'dbAdmin', db: 'svc' }] })",
    );
    expect(js).to.include("app.updateUser('svc', { pwd: process.env.MONGO_PASSWORD })");
    // Compose would substitute a "$" in the script: passwords arrive as environment variables.
    expect(js).to.not.include('$');
    // It is one valid script (mongosh runs JavaScript; its globals are only named here, not run).
    expect(() => new Function('db', 'rs', 'sleep', 'process', js)).to.not.throw();
    expect(init.environment).to.deep.equal({
      // biome-ignore lint/suspicious/noTemplateCurlyInString: docker-compose's ${VAR:?message}, compared as written.
      MONGO_ROOT_PASSWORD: "${MONGO_ROOT_PASSWORD:?set MONGO_ROOT_PASSWORD (the MongoDB root user's password)}",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: docker-compose's ${VAR:?message}, compared as written.
      MONGO_PASSWORD: "${MONGO_PASSWORD:?set MONGO_PASSWORD (hex, the app user's password)}",
    });
    const conf = readFileSync(path.join(deployDir, 'rabbitmq/rabbitmq.conf'), 'utf8');
    expect(conf).to.include('cluster_formation.peer_discovery_backend = classic_config');
    for (const n of [1, 2, 3])
      expect(conf).to.include(`cluster_formation.classic_config.nodes.${n} = rabbit@rabbitmq${n}`);
    // Prometheus scrapes the brokers on 15692: the plugin is enabled explicitly, not by the image's defaults.
    expect(readFileSync(path.join(deployDir, 'rabbitmq/enabled_plugins'), 'utf8')).to.include('rabbitmq_prometheus');
  });

  it('when an app process starts, then its environment is real config keys that validate in production, on quorum queues and every cluster member', () => {
    const keys = new Set(Object.keys(ConfigSchema.shape));
    for (const name of appServices) {
      const env = envOf(name);
      for (const k of Object.keys(env)) expect(keys.has(k), `${name}: ${k}`).to.equal(true);
      const config = loadConfig(env);
      expect(config.NODE_ENV).to.equal('production');
      expect(config.QUEUE_TYPE).to.equal('quorum');
      expect(config.MONGODB_URL).to.equal(
        `mongodb://svc:${secrets.MONGO_PASSWORD}@mongo1:27017,mongo2:27017,mongo3:27017/svc?replicaSet=rs0&authSource=svc`,
      );
      expect(new URL(config.AMQP_URL).hostname).to.equal('rabbitmq');
      // Compose's grace period outlasts the process's drain, sized per pool as in Kubernetes.
      expect(Number.parseInt(services[name]!.stop_grace_period!, 10) * 1000, name).to.be.greaterThan(
        config.SHUTDOWN_GRACE_MS,
      );
      if (name.startsWith('worker-'))
        expect(env.SHUTDOWN_GRACE_MS, name).to.equal(k8sShutdownGrace(name.slice('worker-'.length)));
    }
    expect(rawComposeText).to.not.match(/finishes its jobs (in flight )?before/);
    expect(() =>
      loadConfig(
        Object.fromEntries(Object.entries(services.api!.environment!).map(([k, v]) => [k, interpolate(String(v), {})])),
      ),
    ).to.throw(/ASSET_SIGNING_SECRET/);
  });

  it('when docker-compose runs without MONGO_PASSWORD, then it refuses naming the variable', function () {
    const compose = tool('docker-compose');
    if (!compose) {
      console.log('      docker-compose is not installed (scripts/services.sh installs it): skipped');
      this.skip();
    }
    expect(() =>
      run(compose, ['-f', composeFile, 'config', '-q'], { cwd: deployDir, env: { ...secrets, MONGO_PASSWORD: '' } }),
    ).to.throw(/MONGO_PASSWORD/);
  });

  it('when the host is reached from outside, then only loopback ports are published: the API (not its metrics port) and Prometheus', () => {
    const published = Object.entries(services)
      .filter(([, s]) => s.ports)
      .map(([name, s]) => [name, s.ports!.map((p) => interpolate(p, {}))]);
    expect(published).to.deep.equal([
      ['api', ['127.0.0.1:8080-8083:8080']],
      ['prometheus', ['127.0.0.1:9090:9090']],
    ]);
  });

  it('when Prometheus scrapes the compose services, then its DNS names are the API, the scheduler and every worker service on their metrics ports', () => {
    const prom = parse(readFileSync(path.join(deployDir, 'prometheus/prometheus.yml'), 'utf8')) as {
      scrape_configs: { job_name: string; dns_sd_configs: { names: string[]; port: number }[] }[];
    };
    const job = (name: string) => prom.scrape_configs.find((s) => s.job_name === name)!.dns_sd_configs;
    const defaults = loadConfig({});
    // The API's metrics on METRICS_PORT, set so on the api service (its PORT answers /metrics 404).
    expect(job('svc-api')).to.deep.equal([{ names: ['api'], type: 'A', port: defaults.METRICS_PORT }]);
    expect(Number(services.api!.environment!.METRICS_PORT)).to.equal(defaults.METRICS_PORT);
    expect(job('svc-scheduler')).to.deep.equal([
      { names: ['scheduler'], type: 'A', port: defaults.SCHEDULER_METRICS_PORT },
    ]);
    const workers = job('svc-worker');
    expect(workers.flatMap((w) => w.names).sort()).to.deep.equal(POOL_TYPES.map((p) => `worker-${p}`).sort());
    for (const w of workers) expect(w.port).to.equal(defaults.WORKER_METRICS_PORT);
    expect(services.prometheus!.volumes).to.include('./prometheus:/etc/prometheus:ro');
  });
});

describe('image build context (.dockerignore)', () => {
  // Docker's patterns here are plain names, `*` globs and a leading `**/` (any folders): enough to check the list.
  const patterns = readFileSync(path.join(deployDir, '..', '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  // A pattern as a regular expression; a match also covers everything under the matched path.
  const toRegExp = (pattern: string) => {
    const anyFolders = pattern.startsWith('**/');
    const body = (anyFolders ? pattern.slice(3) : pattern)
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]*');
    return new RegExp(`^${anyFolders ? '(?:.*/)?' : ''}${body}(?:/.*)?$`);
  };
  const matchers = patterns.map(toRegExp);
  const ignored = (file: string) => matchers.some((re) => re.test(file));

  it('when the image is built from the repository root, then the host node_modules, .git, .tools, .tmp, test artifacts and every .env file stay out', () => {
    for (const file of [
      'node_modules/zod/package.json',
      '.git/HEAD',
      '.tools/bin/ferretdb',
      '.tmp/x',
      'test-artifacts/a.png',
      '.env',
      '.env.production',
      'deploy/.env',
      'workers/node_modules/x',
    ]) {
      expect(ignored(file), file).to.equal(true);
    }
    for (const file of [
      'package.json',
      'package-lock.json',
      'api/main.ts',
      'workers/main.ts',
      'scheduler/main.ts',
      'platform/infra/config.ts',
      'contracts/registry.ts',
      'monitoring/metrics.ts',
      'deploy/Dockerfile',
    ]) {
      expect(ignored(file), file).to.equal(false);
    }
  });
});
