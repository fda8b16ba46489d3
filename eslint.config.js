// One linter for src, tests and benches: ESLint's and typescript-eslint's recommended rules.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "coverage/", "data/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // Tests and benches handle untyped JSON (the fake upstream's requests, replies) freely; src/ does not (below).
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-vars": [
        "error",
        {
          argsIgnorePattern: "^_",
          varsIgnorePattern: "^_",
          destructuredArrayIgnorePattern: "^_",
          ignoreRestSiblings: true,
        },
      ],
      "no-control-regex": "off",
    },
  },
  {
    // What an upstream or a client sends is `unknown` until checked, or a declared shape (llm/openai-compatible.ts).
    files: ["src/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "error" },
  },
  {
    // The inspector's browser modules: tsc checks them (src/server/ui/tsconfig.json, DOM types), names included.
    files: ["src/server/ui/**/*.js"],
    rules: { "no-undef": "off" },
  },
);
