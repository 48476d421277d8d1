import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', 'data/**', 'test-artifacts/**', '**/console/assets/**'] },
  js.configs.recommended,
  // The console's browser modules declare their globals in a /* global */ comment.
  {
    files: ['packages/hookline/console/**/*.js'],
    rules: { 'no-redeclare': ['error', { builtinGlobals: false }] },
  },
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: Object.fromEntries(
        [
          'process',
          'console',
          'Buffer',
          'fetch',
          'performance',
          'global',
          'setTimeout',
          'clearTimeout',
          'setInterval',
          'clearInterval',
          'URL',
          'AbortSignal',
        ].map((name) => [name, 'readonly']),
      ),
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
);
