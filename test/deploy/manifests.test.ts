import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { POOL_TYPES, broker, type PoolType } from '../../contracts/registry';
import { ConfigSchema, loadConfig } from '../../platform/infra/config';
import { deployDir } from './deploy-files';

/** One parsed Kubernetes object, with the comment written above it in its file. */
interface Manifest {
  file: string;
  comment: string;
  kind: string;
  apiVersion: string;
  metadata: { name: string };
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

const k8sDir = path.join(deployDir, 'k8s');

function readManifests(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(path.join(k8sDir, file), 'utf8')).map((doc) => {
    expect(doc.errors, file).to.deep.equal([]);
    // The yaml parser hangs a comment above an object on the document, the map or its first key.
    const contents = doc.contents as {
      commentBefore?: string | null;
      items?: { key?: { commentBefore?: string | null } }[];
    } | null;
    const comment = [doc.commentBefore, contents?.commentBefore, contents?.items?.[0]?.key?.commentBefore]
      .filter(Boolean)
      .join('\n');
    return { ...(doc.toJS() as Omit<Manifest, 'file' | 'comment'>), file, comment };
  });
}

const kustomization = parseAllDocuments(readFileSync(path.join(k8sDir, 'kustomization.yaml'), 'utf8'))[0]!.toJS() as {
  resources: string[];
};
const manifests = kustomization.resources.flatMap(readManifests);
const ofKind = (kind: string) => manifests.filter((m) => m.kind === kind);
const named = (kind: string, name: string) => {
  const found = ofKind(kind).find((m) => m.metadata.name === name);
  expect(found, `${kind} ${name}`).to.not.equal(undefined);
  return found!;
};

const configMap = named('ConfigMap', 'svc-config');
const [exampleSecret, exampleKedaSecret] = readManifests('secret.example.yaml') as [Manifest, Manifest];
/** The configuration a pod gets: the ConfigMap, and secrets good enough to pass validation. */
const podConfig = loadConfig({
  ...configMap.data,
  ASSET_SIGNING_SECRET: 'a'.repeat(32),
  WEBHOOK_SECRET_KEY: 'w'.repeat(32),
});
const defaults = loadConfig({});
const prefix = podConfig.QUEUE_PREFIX;

const expectedDeployments = ['api', 'scheduler', ...POOL_TYPES.map((p) => `worker-${p}`)];
const container = (d: Manifest) => d.spec.template.spec.containers[0];
/** SHUTDOWN_GRACE_MS as a Deployment's pods get it: its own `env` over the ConfigMap. */
const shutdownGraceOf = (d: Manifest) => {
  const own = ((container(d).env ?? []) as { name: string; value: string }[]).find(
    (e) => e.name === 'SHUTDOWN_GRACE_MS',
  )?.value;
  return loadConfig({
    ...configMap.data,
    ASSET_SIGNING_SECRET: 'a'.repeat(32),
    WEBHOOK_SECRET_KEY: 'w'.repeat(32),
    ...(own ? { SHUTDOWN_GRACE_MS: own } : {}),
  }).SHUTDOWN_GRACE_MS;
};
/**
 * The longest a piece of work of each pool may run, from the time limits in the code: a stopping
 * worker must be given that long before it aborts its work and hands it back.
 */
const longestWorkMs: Record<PoolType, number> = {
  image: defaults.IMAGE_RPC_TIMEOUT_MS,
  extract: defaults.EXTRACT_RPC_TIMEOUT_MS,
  sheet: defaults.SHEET_RPC_TIMEOUT_MS,
  speech: defaults.SPEECH_RPC_TIMEOUT_MS,
  webhook: 3 * defaults.WEBHOOK_ATTEMPT_TIMEOUT_MS + defaults.WEBHOOK_RETRY_DELAYS_MS.reduce((a, b) => a + b, 0),
  drive: 60_000,
  code: 2 * 120_000, // two provider calls (plan, app), each with openai-chat's 120 s limit
  deck: 120_000, // one provider call
  research: 120_000, // one provider call
  song: 300_000, // the ElevenLabs adapter's limit
  agent: 6 * defaults.CHAT_TIMEOUT_MS, // AGENT_MAX_STEPS steps
  space: Math.max(8 * 60_000, defaults.SPACE_PROVIDER_TIMEOUT_MS), // a local room (SPEC: about 8 min) or a remote one
  video: 30 * 60_000, // the remote video adapter's deadline
};
/** Whether a Kubernetes Ingress path (Exact or Prefix, matched by path element) routes `url`. */
const routes = (p: { path: string; pathType: string }, url: string) =>
  p.pathType === 'Exact'
    ? url === p.path
    : url === p.path.replace(/\/$/, '') || url.startsWith(`${p.path.replace(/\/$/, '')}/`);
/** The container port a probe names (by name or number). */
const probePort = (d: Manifest, probe: { httpGet: { port: string | number } }) => {
  const port = probe.httpGet.port;
  if (typeof port === 'number') return port;
  const found = (container(d).ports as { name: string; containerPort: number }[]).find((p) => p.name === port);
  expect(found, `${d.metadata.name} port ${port}`).to.not.equal(undefined);
  return found!.containerPort;
};

describe('deploy/k8s manifests', () => {
  it('when the kustomization is read, then it lists every manifest file of the pack and each parses to known kinds', () => {
    const files = [
      ...readdirSync(k8sDir).filter((f) => f.endsWith('.yaml')),
      ...readdirSync(path.join(k8sDir, 'pools')).map((f) => `pools/${f}`),
    ].filter((f) => f !== 'kustomization.yaml' && f !== 'secret.example.yaml');
    expect([...kustomization.resources].sort()).to.deep.equal(files.sort());
    const kinds = new Set(manifests.map((m) => `${m.apiVersion} ${m.kind}`));
    expect([...kinds].sort()).to.deep.equal([
      'apps/v1 Deployment',
      'autoscaling/v2 HorizontalPodAutoscaler',
      'keda.sh/v1alpha1 ScaledObject',
      'keda.sh/v1alpha1 TriggerAuthentication',
      'networking.k8s.io/v1 Ingress',
      'networking.k8s.io/v1 NetworkPolicy',
      'policy/v1 PodDisruptionBudget',
      'v1 ConfigMap',
      'v1 Service',
    ]);
  });

  it('when the Deployments are listed, then there is the API, the scheduler and exactly one per pool in POOL_TYPES, each running its pool alone', () => {
    expect(
      ofKind('Deployment')
        .map((d) => d.metadata.name)
        .sort(),
    ).to.deep.equal([...expectedDeployments].sort());
    for (const pool of POOL_TYPES) {
      const env = container(named('Deployment', `worker-${pool}`)).env as { name: string; value: string }[];
      const pools = env.find((e) => e.name === 'WORKER_POOLS')?.value;
      expect(loadConfig({ WORKER_POOLS: pools }).WORKER_POOLS, pool).to.deep.equal([pool]);
      expect(container(named('Deployment', `worker-${pool}`)).args).to.deep.equal(['dist/workers/main.js']);
    }
    expect(container(named('Deployment', 'api')).args).to.deep.equal(['dist/api/main.js']);
    expect(container(named('Deployment', 'scheduler')).args).to.deep.equal(['dist/scheduler/main.js']);
  });

  it('when the probes are read, then readiness is /readyz and liveness /healthz on the port each process serves them by default', () => {
    const portOf = (name: string) =>
      name === 'api'
        ? defaults.PORT
        : name === 'scheduler'
          ? defaults.SCHEDULER_METRICS_PORT
          : defaults.WORKER_METRICS_PORT;
    for (const name of expectedDeployments) {
      const d = named('Deployment', name);
      const c = container(d);
      expect(c.readinessProbe.httpGet.path, name).to.equal('/readyz');
      expect(c.livenessProbe.httpGet.path, name).to.equal('/healthz');
      expect(probePort(d, c.readinessProbe), name).to.equal(portOf(name));
      expect(probePort(d, c.livenessProbe), name).to.equal(portOf(name));
      // The ConfigMap keeps the defaults, and the scrape annotation points at the process's metrics
      // port: the same as its probes, but the API's metrics are on METRICS_PORT (PORT answers 404).
      expect(
        name === 'api'
          ? podConfig.PORT
          : name === 'scheduler'
            ? podConfig.SCHEDULER_METRICS_PORT
            : podConfig.WORKER_METRICS_PORT,
      ).to.equal(portOf(name));
      const metricsPort = name === 'api' ? defaults.METRICS_PORT : portOf(name);
      expect(Number(d.spec.template.metadata.annotations['prometheus.io/port']), name).to.equal(metricsPort);
      expect(
        (c.ports as { containerPort: number }[]).map((p) => p.containerPort),
        name,
      ).to.include(metricsPort);
    }
    expect(podConfig.METRICS_PORT).to.equal(defaults.METRICS_PORT);
  });

  it('when a pod is stopped, then its grace period outlasts the SHUTDOWN_GRACE_MS its pods get', () => {
    for (const d of ofKind('Deployment')) {
      const graceMs = d.spec.template.spec.terminationGracePeriodSeconds * 1000;
      expect(graceMs, d.metadata.name).to.be.greaterThan(shutdownGraceOf(d));
      expect(graceMs, d.metadata.name).to.be.greaterThan(defaults.SHUTDOWN_GRACE_MS);
    }
  });

  it("when a worker is stopped (scale-in, rollout, eviction), then it waits at least its pool's longest job before handing work back", () => {
    for (const pool of POOL_TYPES) {
      const d = named('Deployment', `worker-${pool}`);
      expect(shutdownGraceOf(d), pool).to.be.at.least(longestWorkMs[pool]);
    }
    // No comment may promise more than the pool does: work past the grace period is handed back.
    for (const file of kustomization.resources) {
      const text = readFileSync(path.join(k8sDir, file), 'utf8');
      expect(text, file).to.not.match(/finishes its jobs in flight first|unacked jobs go back to the queue/);
    }
  });

  it('when resources are read, then every Deployment requests CPU and memory, caps memory, and says which measured figures sized it', () => {
    for (const d of ofKind('Deployment')) {
      const { requests, limits } = container(d).resources;
      expect(requests.cpu, d.metadata.name).to.match(/^\d+m?$/);
      expect(requests.memory, d.metadata.name).to.match(/^\d+[MG]i$/);
      expect(limits.memory, d.metadata.name).to.match(/^\d+[MG]i$/);
      expect(d.comment, d.metadata.name).to.match(/Resource requests/);
    }
  });

  it('when KEDA scales a pool, then its ScaledObject targets that Deployment on the queue the code declares for the pool', () => {
    const scaled = ofKind('ScaledObject');
    expect(scaled.map((s) => s.metadata.name).sort()).to.deep.equal(POOL_TYPES.map((p) => `worker-${p}`).sort());
    const auths = new Set(ofKind('TriggerAuthentication').map((t) => t.metadata.name));
    for (const pool of POOL_TYPES) {
      const s = named('ScaledObject', `worker-${pool}`);
      expect(s.spec.scaleTargetRef.name).to.equal(`worker-${pool}`);
      expect(s.spec.minReplicaCount, pool).to.be.at.least(1);
      expect(s.spec.maxReplicaCount, pool).to.be.greaterThan(s.spec.minReplicaCount);
      const triggers = s.spec.triggers as {
        type: string;
        metadata: { queueName: string; mode: string; value: string; protocol: string; vhostName: string };
        authenticationRef: { name: string };
      }[];
      const expected = [
        broker.poolQueue(prefix, pool),
        ...(pool === 'webhook' ? [broker.webhookDeliveryQueue(prefix)] : []),
      ];
      expect(
        triggers.map((t) => t.metadata.queueName),
        pool,
      ).to.deep.equal(expected);
      for (const t of triggers) {
        expect(t.type).to.equal('rabbitmq');
        expect(t.metadata.mode).to.equal('QueueLength');
        expect(Number(t.metadata.value)).to.be.greaterThan(0);
        expect(auths.has(t.authenticationRef.name), t.authenticationRef.name).to.equal(true);
      }
    }
  });

  it('when a queue drains while its workers are still busy, then KEDA still counts their messages and scales in slowly', () => {
    for (const pool of POOL_TYPES) {
      const s = named('ScaledObject', `worker-${pool}`);
      for (const t of s.spec.triggers as { metadata: Record<string, string> }[]) {
        // The management API counts ready + unacknowledged messages; the AMQP protocol only ready ones.
        expect(t.metadata.protocol, pool).to.equal('http');
        expect(t.metadata.vhostName, pool).to.equal('/');
        // A replica busy at its concurrency does not by itself ask for another.
        expect(Number(t.metadata.value), pool).to.be.at.least(podConfig.concurrencyOf(pool));
      }
      const scaleDown = s.spec.advanced?.horizontalPodAutoscalerConfig?.behavior?.scaleDown;
      expect(scaleDown, pool).to.not.equal(undefined);
      // Long pools wait 10 minutes of a low queue before removing a replica, the others 5.
      expect(scaleDown.stabilizationWindowSeconds, pool).to.be.at.least(longestWorkMs[pool] > 60_000 ? 600 : 300);
      expect(scaleDown.policies, pool).to.deep.equal([{ type: 'Pods', value: 1, periodSeconds: 60 }]);
    }
  });

  it('when clients reach the API, then the Ingress routes only the public paths to it and never /metrics or /readyz', () => {
    const ingress = named('Ingress', 'api');
    const paths = (
      ingress.spec.rules as {
        http: {
          paths: { path: string; pathType: string; backend: { service: { name: string; port: { name: string } } } }[];
        };
      }[]
    ).flatMap((r) => r.http.paths);
    for (const p of paths) expect(p.backend.service).to.deep.equal({ name: 'api', port: { name: 'http' } });
    const routed = (url: string) => paths.some((p) => routes(p, url));
    for (const url of ['/api/v1/account', '/api/v1/openapi', '/mcp', '/console/login', '/realtime', '/healthz'])
      expect(routed(url), url).to.equal(true);
    for (const url of ['/metrics', '/metrics/', '/readyz', '/', '/api', '/apiv1/x'])
      expect(routed(url), url).to.equal(false);
    // The Service stays inside the cluster; no Service is published on the nodes or a cloud load balancer.
    for (const s of ofKind('Service')) expect(s.spec.type ?? 'ClusterIP', s.metadata.name).to.equal('ClusterIP');
  });

  it('when anything in the cluster connects to a pod, then only the ingress controller (API port) and Prometheus (metrics ports) are let in', () => {
    const policies = ofKind('NetworkPolicy');
    const selects = (policy: Manifest, labels: Record<string, string>) => {
      const sel = policy.spec.podSelector as {
        matchLabels?: Record<string, string>;
        matchExpressions?: { key: string; operator: string; values: string[] }[];
      };
      return (
        Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v) &&
        (sel.matchExpressions ?? []).every((e) => e.operator === 'In' && e.values.includes(labels[e.key]!))
      );
    };
    const namespacesOf = (policy: Manifest) =>
      (policy.spec.ingress as { from: { namespaceSelector: { matchLabels: Record<string, string> } }[] }[]).flatMap(
        (r) => r.from.map((f) => f.namespaceSelector.matchLabels['kubernetes.io/metadata.name']),
      );
    const portsOf = (policy: Manifest) =>
      (policy.spec.ingress as { ports: { port: number }[] }[]).flatMap((r) => r.ports.map((p) => p.port)).sort();
    for (const d of ofKind('Deployment')) {
      const mine = policies.filter((p) => selects(p, d.spec.template.metadata.labels));
      expect(mine.length, d.metadata.name).to.equal(1);
      const policy = mine[0]!;
      expect(policy.spec.policyTypes).to.deep.equal(['Ingress']);
      if (d.metadata.name === 'api') {
        // The API port from the ingress controller only; the metrics port from Prometheus only.
        const rules = (
          policy.spec.ingress as {
            from: { namespaceSelector: { matchLabels: Record<string, string> } }[];
            ports: { port: number }[];
          }[]
        ).map((r) => ({
          from: r.from.map((f) => f.namespaceSelector.matchLabels['kubernetes.io/metadata.name']).sort(),
          ports: r.ports.map((p) => p.port).sort(),
        }));
        expect(rules).to.have.deep.members([
          { from: ['ingress-nginx'], ports: [defaults.PORT] },
          { from: ['monitoring'], ports: [defaults.METRICS_PORT] },
        ]);
      } else {
        expect(namespacesOf(policy), d.metadata.name).to.deep.equal(['monitoring']);
        expect(portsOf(policy)).to.include(
          d.metadata.name === 'scheduler' ? defaults.SCHEDULER_METRICS_PORT : defaults.WORKER_METRICS_PORT,
        );
        expect(portsOf(policy)).to.not.include(defaults.PORT);
      }
    }
  });

  it('when a node is drained, then every Deployment has a PodDisruptionBudget selecting exactly its pods', () => {
    expect(
      ofKind('PodDisruptionBudget')
        .map((p) => p.metadata.name)
        .sort(),
    ).to.deep.equal([...expectedDeployments].sort());
    for (const d of ofKind('Deployment')) {
      const pdb = named('PodDisruptionBudget', d.metadata.name);
      expect(pdb.spec.selector.matchLabels).to.deep.equal(d.spec.selector.matchLabels);
      expect(d.spec.template.metadata.labels).to.include(d.spec.selector.matchLabels);
      expect(pdb.spec.minAvailable ?? pdb.spec.maxUnavailable).to.equal(1);
    }
    for (const s of ofKind('Service'))
      expect(s.spec.selector).to.deep.equal(named('Deployment', s.metadata.name).spec.selector.matchLabels);
  });

  it('when configuration reaches the pods, then it comes from the ConfigMap and the Secret, and names only real config keys', () => {
    const keys = new Set(Object.keys(ConfigSchema.shape));
    for (const k of [...Object.keys(configMap.data!), ...Object.keys(exampleSecret.stringData!)])
      expect(keys.has(k), k).to.equal(true);
    expect(exampleSecret.kind).to.equal('Secret');
    // The example's placeholders must not start a process.
    expect(() => loadConfig({ ...configMap.data, ...exampleSecret.stringData })).to.throw(/ASSET_SIGNING_SECRET/);
    for (const d of ofKind('Deployment')) {
      const c = container(d);
      expect(c.envFrom).to.deep.equal([
        { configMapRef: { name: 'svc-config' } },
        { secretRef: { name: exampleSecret.metadata.name } },
      ]);
      for (const e of (c.env ?? []) as { name: string }[]) expect(keys.has(e.name), e.name).to.equal(true);
    }
    // KEDA's own Secret (the management API, never mounted in a pod).
    const auth = named('TriggerAuthentication', 'svc-rabbitmq-management');
    expect(auth.spec.secretTargetRef).to.deep.equal([
      { parameter: 'host', name: exampleKedaSecret.metadata.name, key: 'host' },
    ]);
    expect(exampleKedaSecret.kind).to.equal('Secret');
    const host = new URL(exampleKedaSecret.stringData!.host!);
    expect([host.protocol, host.port]).to.deep.equal(['http:', '15672']);
  });
});
