// @ts-check
// `npm run lint` (run by `npm test` before the suite): ESLint's recommended rules and
// typescript-eslint's recommended-type-checked ones, with the type information of tsconfig.json.
// Prettier owns the layout (.prettierrc); these rules are about what the code means. The few rules
// turned off or tuned below each say which deliberate pattern of patchbay they would fight.
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "out/", "reports/", ".stryker-tmp/", "patchbay-out/", "demo-out/", "scratch/", ".scratch/"] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        // tsconfig.json covers src/, test/ and bench/; the few TypeScript files outside it (the
        // configs, scripts/*.ts, docs/screenshots.ts) are checked with its options too.
        projectService: {
          allowDefaultProject: ["*.config.ts", "scripts/*.ts", "docs/*.ts"],
          defaultProject: "tsconfig.json",
        },
        tsconfigRootDir: import.meta.dirname,
      },
      globals: { ...globals.node },
    },
    rules: {
      // The scrubbers of untrusted text (src/core/term.ts, campaign/inert-text.ts, result-bounds.ts,
      // the tar and git readers, …) match control characters on purpose: that is their job.
      "no-control-regex": "off",
      // An `async` function with no `await` is how patchbay implements a Promise-returning interface
      // (a Backend, a Fastify plugin, which Fastify takes as async or with a `done` callback) so that
      // a throw becomes a rejection; the rule would have them rewritten as Promise.resolve() plumbing.
      "@typescript-eslint/require-await": "off",
      // A leading underscore names what is dropped on purpose: `const { patchStored: _, ...rest } = r`.
      "@typescript-eslint/no-unused-vars": [
        "error",
        {
          argsIgnorePattern: "^_",
          varsIgnorePattern: "^_",
          caughtErrorsIgnorePattern: "^_",
          destructuredArrayIgnorePattern: "^_",
          ignoreRestSiblings: true,
        },
      ],
    },
  },
  {
    // The tests' fakes (the model API, the forges) and their checks read untyped JSON from the wire,
    // from result.json and from transcripts; `expect` is the check of its shape, and a wrong guess
    // fails the test. So `any` is allowed in test/ (nowhere else).
    files: ["test/**/*.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-return": "off",
    },
  },
  {
    // Plain JavaScript has no types to check: ESLint's own rules only.
    files: ["**/*.js", "**/*.mjs"],
    extends: [tseslint.configs.disableTypeChecked],
  },
  {
    // The dashboard's browser scripts: classic scripts sharing one global, window.PB (transcript.js).
    files: ["src/web/assets/*.js"],
    languageOptions: { sourceType: "script", globals: { ...globals.browser, PB: "readonly" } },
  },
);
