import path from 'node:path';
import ts from 'typescript';

/**
 * A TypeScript program over `files` (paths from the project root) with the project's compiler
 * options, for the layout rules that read types: it reads only those files and what they
 * import, so it stays a few seconds. `exports` yields each file's source and exported symbols.
 */
export function typeProgram(root: string, files: string[]) {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    path.join(root, 'tsconfig.json'),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined },
  );
  const program = ts.createProgram(
    files.map((f) => path.join(root, f)),
    { ...parsed!.options, noEmit: true },
  );
  const checker = program.getTypeChecker();
  function* exports(): Generator<{ file: string; src: ts.SourceFile; symbols: ts.Symbol[] }> {
    for (const file of files) {
      const src = program.getSourceFile(path.join(root, file))!;
      const mod = checker.getSymbolAtLocation(src);
      yield { file, src, symbols: mod ? checker.getExportsOfModule(mod) : [] };
    }
  }
  return { checker, exports };
}
