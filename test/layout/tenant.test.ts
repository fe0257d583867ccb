import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import type ts from 'typescript';
import { typeProgram } from './type-program';

/**
 * Repositories of tenant data take the account id in their type: an account's operations are
 * reached only through `forAccount(accountId)`, whose methods take no account id and are built on
 * `accountSlice` (platform/infra/tenant.ts), so no query can forget the tenant filter. Checked
 * with the type checker on every `*.repository.ts`: no export, and no member of what an export
 * returns, other than `forAccount`, has a parameter named `accountId`.
 *
 * Operations that are not one account's (sweeps across accounts, reads by a global id before the
 * account is known, inserts of a whole document that names its account) stay at the top level
 * and take no account id.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

function accountTakers(files: string[]): string[] {
  const { checker, exports } = typeProgram(ROOT, files);
  const takes = (s: ts.Signature) => s.getParameters().some((p) => p.getName() === 'accountId');
  const out: string[] = [];
  for (const { file: f, src, symbols } of exports()) {
    for (const e of symbols) {
      if (e.getName() === 'forAccount') continue;
      const t = checker.getTypeOfSymbolAtLocation(e, src);
      for (const sig of t.getCallSignatures()) {
        if (takes(sig)) out.push(`${f}: ${e.getName()}`);
        for (const m of sig.getReturnType().getProperties()) {
          if (m.getName() === 'forAccount') continue;
          if (checker.getTypeOfSymbolAtLocation(m, src).getCallSignatures().some(takes)) {
            out.push(`${f}: ${e.getName()}().${m.getName()}`);
          }
        }
      }
    }
  }
  return [...new Set(out)].sort();
}

describe('layout: tenant data through forAccount', function () {
  this.timeout(120_000);

  it('when a repository reads or changes an account’s data, then it does so through forAccount(accountId) only', () => {
    const repositories = execFileSync('git', ['ls-files', '*.repository.ts'], { cwd: ROOT, encoding: 'utf8' })
      .split('\n')
      .filter((f) => f && fs.existsSync(path.join(ROOT, f)));
    expect(accountTakers(repositories)).to.deep.equal([]);
  });
});
