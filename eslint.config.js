import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '.tmp/**',
      'docs/api/**',
      '**/*.js',
      '**/*.mjs',
      '!bench/**/*.mjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  // The benchmarks are plain ES modules run by Node: linted without type information.
  {
    files: ['bench/**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      parserOptions: { project: false, program: null },
      globals: Object.fromEntries(
        [
          'AbortController',
          'AbortSignal',
          'Buffer',
          'URL',
          'clearTimeout',
          'console',
          'fetch',
          'performance',
          'process',
          'setImmediate',
          'setTimeout',
        ].map((name) => [name, 'readonly']),
      ),
    },
  },
);
