// ESLint (flat config): Next's rules (React, react-hooks including the
// React Compiler checks, jsx-a11y, @next/next) and typescript-eslint's
// type-aware recommended rules for the app; plain recommended rules for the
// browser tests and scripts.
import nextVitals from "eslint-config-next/core-web-vitals";
import nextTs from "eslint-config-next/typescript";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: [".next/**", ".test-build/**", "node_modules/**", "e2e/artifacts/**", "next-env.d.ts"] },
  ...nextVitals,
  ...nextTs,
  {
    files: ["**/*.ts", "**/*.tsx"],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": [
        "error",
        { allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["test", "it", "describe", "suite"] }] },
      ],
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { attributes: false } }],
    },
  },
  {
    files: ["test/**/*.ts"],
    languageOptions: { parserOptions: { projectService: false, project: "./tsconfig.test.json" } },
  },
  {
    files: ["**/*.mjs"],
    rules: { "import/no-anonymous-default-export": "off" },
  },
  {
    // Warnings fail the lint too: nothing is left half-reported.
    linterOptions: { reportUnusedDisableDirectives: "error" },
  },
);
