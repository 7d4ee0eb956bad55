/// <reference types="vitest/config" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";
import { existsSync, readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

// The API's exported schema, bundled so the UI knows the fields when introspection is off (production):
// schema/graphql/schema.graphql, else asked of the project's Python package, else none (then the UI
// asks the API by introspection, which development mode allows).
function readSdl(): string {
  const path = process.env.STEWARD_SCHEMA_SDL ?? fileURLToPath(new URL("../schema/graphql/schema.graphql", import.meta.url));
  if (existsSync(path)) return readFileSync(path, "utf8");
  const python = fileURLToPath(new URL("../.venv/bin/python", import.meta.url));
  if (!existsSync(python)) return "";
  try {
    return execFileSync(python, ["-c", "from steward.api.schema import sdl; print(sdl(), end='')"], { encoding: "utf8", timeout: 60_000 });
  } catch {
    return "";
  }
}
const sdl = readSdl();

// The API process serves web/dist at `/`; in development `npm run dev` proxies /graphql to a running API.
const api = process.env.STEWARD_API_URL ?? "http://127.0.0.1:8000";

export default defineConfig({
  plugins: [react()],
  define: { __STEWARD_SDL__: JSON.stringify(sdl) },
  base: "./",
  build: { outDir: "dist", sourcemap: false, chunkSizeWarningLimit: 1500 },
  server: { proxy: { "/graphql": { target: api, ws: true }, "/healthz": api } },
  test: { include: ["src/**/*.test.ts", "src/**/*.test.tsx"] },
});
