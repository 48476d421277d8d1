// The catalogue's TypeScript types, as a producer importing `hookline` sees them: a misspelt event
// name or data without its ids does not compile (test/catalogue/fixtures/typed-events.ts).
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const fixture = fileURLToPath(new URL('./fixtures/typed-events.ts', import.meta.url));
const baseConfig = fileURLToPath(new URL('../../../../tsconfig.base.json', import.meta.url));

/** The diagnostics of `file` under the repository's compiler options (tsconfig.base.json). */
function compile(file: string): string[] {
  const { config } = ts.readConfigFile(baseConfig, (path) => ts.sys.readFile(path));
  const { options, errors } = ts.convertCompilerOptionsFromJson(
    (config as { compilerOptions: unknown }).compilerOptions,
    ts.sys.getCurrentDirectory(),
  );
  expect(errors).toEqual([]);
  const program = ts.createProgram([file], {
    ...options,
    noEmit: true,
    composite: false,
    declaration: false,
  });
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file
      ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: `
      : '';
    return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
  });
}

describe('typed events', () => {
  it(
    'compiles the fixture: every @ts-expect-error line is an error, nothing else is',
    { timeout: 120_000 },
    () => {
      expect(compile(fixture)).toEqual([]);
    },
  );
});
