import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';
import { POOL_TYPES } from '../../contracts/registry';
import { ConfigSchema, loadConfig } from '../../platform/config';
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
}

const composeFile = path.join(deployDir, 'compose.yaml');
/** What an operator exports before `up` (compose refuses to start without them). */
const secrets = { ASSET_SIGNING_SECRET: 'a'.repeat(32), WEBHOOK_SECRET_KEY: 'w'.repeat(32), RABBITMQ_PASSWORD: 'p4ss', RABBITMQ_ERLANG_COOKIE: 'cookie' };
/** Compose's `${VAR:?message}` / `${VAR:-default}`, resolved the way compose does it. */
const interpolate = (value: string, env: Record<string, string>) =>
  value.replace(/\$\{(\w+)(?::([?-])([^}]*))?\}/g, (_m, name: string, op?: string, rest?: string) => env[name] ?? (op === '-' ? rest! : ''));

const services = (parse(readFileSync(composeFile, 'utf8'), { merge: true }) as { services: Record<string, Service> }).services;
const appServices = ['api', 'scheduler', ...POOL_TYPES.map((p) => `worker-${p}`)];
const envOf = (name: string) => Object.fromEntries(Object.entries(services[name]!.environment ?? {}).map(([k, v]) => [k, interpolate(String(v), secrets)]));

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
      ['mongo1', 'mongo2', 'mongo3', 'mongo-init', 'rabbitmq1', 'rabbitmq2', 'rabbitmq3', 'prometheus', ...appServices].sort(),
    );
    for (const pool of POOL_TYPES) {
      const env = envOf(`worker-${pool}`);
      expect(loadConfig(env).WORKER_POOLS, pool).to.deep.equal([pool]);
      expect(services[`worker-${pool}`]!.command).to.deep.equal(['workers/main.ts']);
    }
    expect(services.api!.command).to.deep.equal(['api/main.ts']);
    expect(services.scheduler!.command).to.deep.equal(['scheduler/main.ts']);
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
    const conf = readFileSync(path.join(deployDir, 'rabbitmq/rabbitmq.conf'), 'utf8');
    expect(conf).to.include('cluster_formation.peer_discovery_backend = classic_config');
    for (const n of [1, 2, 3]) expect(conf).to.include(`cluster_formation.classic_config.nodes.${n} = rabbit@rabbitmq${n}`);
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
      expect(config.MONGODB_URL).to.match(/^mongodb:\/\/mongo1:27017,mongo2:27017,mongo3:27017\/svc\?replicaSet=rs0$/);
      expect(new URL(config.AMQP_URL).hostname).to.equal('rabbitmq');
      // Compose's grace period (40s) outlasts the worker's drain.
      expect(Number.parseInt(services[name]!.stop_grace_period!, 10) * 1000, name).to.be.greaterThan(config.SHUTDOWN_GRACE_MS);
    }
    expect(() => loadConfig(Object.fromEntries(Object.entries(services.api!.environment!).map(([k, v]) => [k, interpolate(String(v), {})])))).to.throw(/ASSET_SIGNING_SECRET/);
  });

  it("when Prometheus scrapes the compose services, then its DNS names are the API, the scheduler and every worker service on their metrics ports", () => {
    const prom = parse(readFileSync(path.join(deployDir, 'prometheus/prometheus.yml'), 'utf8')) as {
      scrape_configs: { job_name: string; dns_sd_configs: { names: string[]; port: number }[] }[];
    };
    const job = (name: string) => prom.scrape_configs.find((s) => s.job_name === name)!.dns_sd_configs;
    const defaults = loadConfig({});
    expect(job('svc-api')).to.deep.equal([{ names: ['api'], type: 'A', port: defaults.PORT }]);
    expect(job('svc-scheduler')).to.deep.equal([{ names: ['scheduler'], type: 'A', port: defaults.SCHEDULER_METRICS_PORT }]);
    const workers = job('svc-worker');
    expect(workers.flatMap((w) => w.names).sort()).to.deep.equal(POOL_TYPES.map((p) => `worker-${p}`).sort());
    for (const w of workers) expect(w.port).to.equal(defaults.WORKER_METRICS_PORT);
    expect(services.prometheus!.volumes).to.include('./prometheus:/etc/prometheus:ro');
  });
});
