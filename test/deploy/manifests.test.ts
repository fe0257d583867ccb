import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { POOL_TYPES, broker } from '../../contracts/registry';
import { ConfigSchema, loadConfig } from '../../platform/config';
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
    const contents = doc.contents as { commentBefore?: string | null; items?: { key?: { commentBefore?: string | null } }[] } | null;
    const comment = [doc.commentBefore, contents?.commentBefore, contents?.items?.[0]?.key?.commentBefore].filter(Boolean).join('\n');
    return { ...(doc.toJS() as Omit<Manifest, 'file' | 'comment'>), file, comment };
  });
}

const kustomization = parseAllDocuments(readFileSync(path.join(k8sDir, 'kustomization.yaml'), 'utf8'))[0]!.toJS() as { resources: string[] };
const manifests = kustomization.resources.flatMap(readManifests);
const ofKind = (kind: string) => manifests.filter((m) => m.kind === kind);
const named = (kind: string, name: string) => {
  const found = ofKind(kind).find((m) => m.metadata.name === name);
  expect(found, `${kind} ${name}`).to.not.equal(undefined);
  return found!;
};

const configMap = named('ConfigMap', 'svc-config');
const exampleSecret = readManifests('secret.example.yaml')[0]!;
/** The configuration a pod gets: the ConfigMap, and secrets good enough to pass validation. */
const podConfig = loadConfig({ ...configMap.data, ASSET_SIGNING_SECRET: 'a'.repeat(32), WEBHOOK_SECRET_KEY: 'w'.repeat(32) });
const defaults = loadConfig({});
const prefix = podConfig.QUEUE_PREFIX;

const expectedDeployments = ['api', 'scheduler', ...POOL_TYPES.map((p) => `worker-${p}`)];
const container = (d: Manifest) => d.spec.template.spec.containers[0];
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
      'policy/v1 PodDisruptionBudget',
      'v1 ConfigMap',
      'v1 Service',
    ]);
  });

  it('when the Deployments are listed, then there is the API, the scheduler and exactly one per pool in POOL_TYPES, each running its pool alone', () => {
    expect(ofKind('Deployment').map((d) => d.metadata.name).sort()).to.deep.equal([...expectedDeployments].sort());
    for (const pool of POOL_TYPES) {
      const env = container(named('Deployment', `worker-${pool}`)).env as { name: string; value: string }[];
      const pools = env.find((e) => e.name === 'WORKER_POOLS')?.value;
      expect(loadConfig({ WORKER_POOLS: pools }).WORKER_POOLS, pool).to.deep.equal([pool]);
      expect(container(named('Deployment', `worker-${pool}`)).args).to.deep.equal(['workers/main.ts']);
    }
    expect(container(named('Deployment', 'api')).args).to.deep.equal(['api/main.ts']);
    expect(container(named('Deployment', 'scheduler')).args).to.deep.equal(['scheduler/main.ts']);
  });

  it('when the probes are read, then readiness is /readyz and liveness /healthz on the port each process serves them by default', () => {
    const portOf = (name: string) => (name === 'api' ? defaults.PORT : name === 'scheduler' ? defaults.SCHEDULER_METRICS_PORT : defaults.WORKER_METRICS_PORT);
    for (const name of expectedDeployments) {
      const d = named('Deployment', name);
      const c = container(d);
      expect(c.readinessProbe.httpGet.path, name).to.equal('/readyz');
      expect(c.livenessProbe.httpGet.path, name).to.equal('/healthz');
      expect(probePort(d, c.readinessProbe), name).to.equal(portOf(name));
      expect(probePort(d, c.livenessProbe), name).to.equal(portOf(name));
      // The ConfigMap keeps the defaults, and the scrape annotation points at the same port.
      expect(name === 'api' ? podConfig.PORT : name === 'scheduler' ? podConfig.SCHEDULER_METRICS_PORT : podConfig.WORKER_METRICS_PORT).to.equal(portOf(name));
      expect(Number(d.spec.template.metadata.annotations['prometheus.io/port']), name).to.equal(portOf(name));
    }
  });

  it('when a pod is stopped, then its grace period outlasts SHUTDOWN_GRACE_MS (default and configured)', () => {
    for (const d of ofKind('Deployment')) {
      const graceMs = d.spec.template.spec.terminationGracePeriodSeconds * 1000;
      expect(graceMs, d.metadata.name).to.be.greaterThan(defaults.SHUTDOWN_GRACE_MS);
      expect(graceMs, d.metadata.name).to.be.greaterThan(podConfig.SHUTDOWN_GRACE_MS);
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
      const triggers = s.spec.triggers as { type: string; metadata: { queueName: string; mode: string; value: string }; authenticationRef: { name: string } }[];
      const expected = [broker.poolQueue(prefix, pool), ...(pool === 'webhook' ? [broker.webhookDeliveryQueue(prefix)] : [])];
      expect(triggers.map((t) => t.metadata.queueName), pool).to.deep.equal(expected);
      for (const t of triggers) {
        expect(t.type).to.equal('rabbitmq');
        expect(t.metadata.mode).to.equal('QueueLength');
        expect(Number(t.metadata.value)).to.be.greaterThan(0);
        expect(auths.has(t.authenticationRef.name), t.authenticationRef.name).to.equal(true);
      }
    }
  });

  it('when a node is drained, then every Deployment has a PodDisruptionBudget selecting exactly its pods', () => {
    expect(ofKind('PodDisruptionBudget').map((p) => p.metadata.name).sort()).to.deep.equal([...expectedDeployments].sort());
    for (const d of ofKind('Deployment')) {
      const pdb = named('PodDisruptionBudget', d.metadata.name);
      expect(pdb.spec.selector.matchLabels).to.deep.equal(d.spec.selector.matchLabels);
      expect(d.spec.template.metadata.labels).to.include(d.spec.selector.matchLabels);
      expect(pdb.spec.minAvailable ?? pdb.spec.maxUnavailable).to.equal(1);
    }
    for (const s of ofKind('Service')) expect(s.spec.selector).to.deep.equal(named('Deployment', s.metadata.name).spec.selector.matchLabels);
  });

  it('when configuration reaches the pods, then it comes from the ConfigMap and the Secret, and names only real config keys', () => {
    const keys = new Set(Object.keys(ConfigSchema.shape));
    for (const k of [...Object.keys(configMap.data!), ...Object.keys(exampleSecret.stringData!)]) expect(keys.has(k), k).to.equal(true);
    expect(exampleSecret.kind).to.equal('Secret');
    // The example's placeholders must not start a process.
    expect(() => loadConfig({ ...configMap.data, ...exampleSecret.stringData })).to.throw(/ASSET_SIGNING_SECRET/);
    for (const d of ofKind('Deployment')) {
      const c = container(d);
      expect(c.envFrom).to.deep.equal([{ configMapRef: { name: 'svc-config' } }, { secretRef: { name: exampleSecret.metadata.name } }]);
      for (const e of (c.env ?? []) as { name: string }[]) expect(keys.has(e.name), e.name).to.equal(true);
    }
    const auth = named('TriggerAuthentication', 'svc-rabbitmq');
    expect(auth.spec.secretTargetRef).to.deep.equal([{ parameter: 'host', name: exampleSecret.metadata.name, key: 'AMQP_URL' }]);
    expect(exampleSecret.stringData).to.have.property('AMQP_URL');
  });
});
