import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { deployDir } from './deploy-files';

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}

/** Every panel query of every Grafana dashboard in deploy/grafana/, with the panel it belongs to. */
export function dashboardQueries(): { dashboard: string; panel: string; expr: string }[] {
  const dir = path.join(deployDir, 'grafana');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .flatMap((file) => {
      const walk = (panels: Panel[]): Panel[] => panels.flatMap((p) => [p, ...walk(p.panels ?? [])]);
      const dashboard = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { panels: Panel[] };
      return walk(dashboard.panels).flatMap((p) =>
        (p.targets ?? []).map((t) => ({ dashboard: file, panel: p.title, expr: t.expr })),
      );
    });
}
