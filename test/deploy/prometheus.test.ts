import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';
import { registry } from '../../monitoring/metrics';
import { deployDir, run, tool } from './deploy-files';
import { dashboardQueries } from './dashboard';

const promDir = path.join(deployDir, 'prometheus');
const ruleFiles = ['recording.yml', 'alerts.yml'];

interface RuleFile {
  groups: { name: string; rules: { record?: string; alert?: string; expr: string }[] }[];
}
const rules = ruleFiles.flatMap((f) =>
  (parse(readFileSync(path.join(promDir, f), 'utf8')) as RuleFile).groups.flatMap((g) => g.rules),
);

/** Skip a test, saying why, when this machine lacks promtool. */
function promtool(ctx: Mocha.Context): string {
  const found = tool('promtool');
  if (!found) {
    console.log('      promtool is not installed (scripts/services.sh installs Debian prometheus): skipped');
    ctx.skip();
  }
  return found;
}

const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
]);

/**
 * The metric names a PromQL expression reads. Hand-written because no maintained JavaScript
 * PromQL parser exists for Node (promtool has no AST output either): string literals, label
 * matchers, ranges, grouping clauses and numbers are removed, then every identifier that is not a function
 * call or a keyword is a metric name.
 */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b/gi, ' ');
  return [...stripped.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)]
    .filter((m) => !m[2] && !KEYWORDS.has(m[1]!))
    .map((m) => m[1]!);
}

describe('deploy/prometheus rules', () => {
  it('when promtool checks the alert and recording rules, then both files are valid', function () {
    const bin = promtool(this);
    const out = run(bin, ['check', 'rules', ...ruleFiles], { cwd: promDir });
    expect(out).to.match(/recording\.yml\s+SUCCESS: \d+ rules found/);
    expect(out).to.match(/alerts\.yml\s+SUCCESS: \d+ rules found/);
  });

  it('when promtool runs the rule unit tests, then every alert fires on its case and stays quiet on the look-alikes', function () {
    const bin = promtool(this);
    for (const file of ['recording.test.yml', 'alerts.test.yml'])
      expect(run(bin, ['test', 'rules', file], { cwd: promDir })).to.include('SUCCESS');
  });

  it('when promtool checks the compose Prometheus config, then it is valid with the rule files in place', function () {
    const bin = promtool(this);
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-prom-'));
    try {
      for (const f of ruleFiles) writeFileSync(path.join(dir, f), readFileSync(path.join(promDir, f)));
      const config = readFileSync(path.join(promDir, 'prometheus.yml'), 'utf8').replaceAll(
        '/etc/prometheus/',
        `${dir}/`,
      );
      writeFileSync(path.join(dir, 'prometheus.yml'), config);
      expect(run(bin, ['check', 'config', path.join(dir, 'prometheus.yml')])).to.include('SUCCESS');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when the issue list of alerts is read, then every one of them exists', () => {
    expect(rules.filter((r) => r.alert).map((r) => r.alert)).to.include.members([
      'QueueBacklogGrowing',
      'JobFailureRatioHigh',
      'MessagesDeadLettered',
      'WebhookEndpointsDisabled',
      'Http5xxRatioHigh',
      'RouteLatencyP99High',
      'SchedulerTaskFailing',
      'ProcessNotReady',
    ]);
  });

  it('when the rules and the dashboard name a metric, then the code exports it (or a recording rule records it)', async () => {
    const exported = new Set(['up']);
    for (const m of await registry.getMetricsAsJSON()) {
      exported.add(m.name);
      if (String(m.type) === 'histogram') for (const s of ['_bucket', '_count', '_sum']) exported.add(m.name + s);
    }
    for (const r of rules) if (r.record) exported.add(r.record);
    // The name extraction itself: functions, keywords, groupings, matchers and strings are not names.
    expect(
      metricNames(
        'sum by (a) (rate(x_total{q=~"y\\\\.z"}[5m])) / on (a) group_left label_replace(up, "b", "$1", "a", "(.+)") > 1e3',
      ),
    ).to.deep.equal(['x_total', 'up']);
    const used = [...rules.map((r) => r.expr), ...dashboardQueries().map((q) => q.expr)];
    expect(used.length).to.be.greaterThan(40);
    for (const expr of used)
      for (const name of metricNames(expr)) expect(exported.has(name), `${name} in ${expr}`).to.equal(true);
  });
});
