// Packages only the baselines need, installed on first use into bench/.deps rather than declared in
// the repository: BullMQ pulls in native add-ons for every platform, and a lock file that must list
// them all cannot be installed with `npm ci` from a registry that lacks some (ours). `npm run bench`
// installs them once; `npm ci` and `npm test` never see them.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../.deps');
const PACKAGES = { bullmq: '^6.7.0', ioredis: '^6.0.0' };

/** Installs the baselines' packages unless they are there already. */
export function ensureBenchDeps(log = () => {}) {
  const require = createRequire(path.join(DIR, 'package.json'));
  const missing = Object.keys(PACKAGES).filter((name) => {
    try {
      require.resolve(name);
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length === 0) return;
  log(`installing ${missing.join(', ')} into bench/.deps (once)`);
  mkdirSync(DIR, { recursive: true });
  if (!existsSync(path.join(DIR, 'package.json'))) {
    writeFileSync(path.join(DIR, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
  }
  execFileSync(
    'npm',
    [
      'install',
      '--no-save',
      '--no-package-lock',
      '--no-audit',
      '--no-fund',
      '--prefix',
      DIR,
      ...Object.entries(PACKAGES).map(([name, range]) => `${name}@${range}`),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

/** Imports a baseline's package from bench/.deps. */
export async function importBenchDep(name) {
  const require = createRequire(path.join(DIR, 'package.json'));
  return import(pathToFileURL(require.resolve(name)).href);
}
