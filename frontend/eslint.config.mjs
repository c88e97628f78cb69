// ESLint (flat config): Next's own rules (@next/next, core web vitals),
// react-hooks (including the React Compiler checks) and typescript-eslint's
// type-aware recommended rules for the app; plain recommended rules for the
// browser tests and scripts. Accessibility is checked in the browser by
// axe-core (e2e), not here. (eslint-config-next is not used: its import
// resolver's platform packages are missing from the lockfile npm writes
// here, so `npm ci` refuses it.)
import js from "@eslint/js";
import nextPlugin from "@next/eslint-plugin-next";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: [".next/**", ".test-build/**", "node_modules/**", "e2e/artifacts/**", "next-env.d.ts", "examples/*/node_modules/**", "examples/*/dist/**", "examples/*/src/**"] },
  js.configs.recommended,
  {
    files: ["**/*.ts", "**/*.tsx"],
    extends: [tseslint.configs.recommendedTypeChecked],
    plugins: { "@next/next": nextPlugin, "react-hooks": reactHooks },
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      ...nextPlugin.configs.recommended.rules,
      ...nextPlugin.configs["core-web-vitals"].rules,
      ...reactHooks.configs.recommended.rules,
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
    // Node scripts whose page.evaluate callbacks run in the browser.
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
  },
  {
    // Warnings fail the lint too: nothing is left half-reported.
    linterOptions: { reportUnusedDisableDirectives: "error" },
  },
);
