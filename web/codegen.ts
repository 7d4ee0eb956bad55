// `npm run codegen`: the UI's operation types from the API's exported schema (ADR 0042). The SDL is
// schema/graphql/schema.graphql (checked against the API by tests/unit/api/test_schema_export.py); the
// operations are src/api/operations/*.graphql; the output, src/api/generated.ts, is committed and never
// edited by hand. `npm run codegen:check` (run by `npm test`) fails when it is stale.
import type { CodegenConfig } from "@graphql-codegen/cli";

const config: CodegenConfig = {
  schema: "../schema/graphql/schema.graphql",
  documents: ["src/api/operations/*.graphql"],
  generates: {
    "src/api/generated.ts": {
      plugins: ["typescript-operations", "typed-document-node"],
      config: {
        documentMode: "string", // each operation's text as sent, typed by its result and variables
        enumsAsTypes: true,
        avoidOptionals: { field: true, inputValue: false, object: true },
        scalars: { JSON: "unknown", BigInt: "number" }, // BigInt: a JSON number (exact up to 2^53 - 1)
        useTypeImports: true,
        nonOptionalTypename: true,
      },
    },
  },
};

export default config;
