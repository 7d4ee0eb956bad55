/// <reference types="vitest/config" />
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The API process serves web/dist at `/`; in development `npm run dev` proxies /graphql to a running API.
const api = process.env.STEWARD_API_URL ?? "http://127.0.0.1:8000";

export default defineConfig({
  plugins: [react()],
  base: "./",
  build: { outDir: "dist", sourcemap: false, chunkSizeWarningLimit: 1500 },
  server: { proxy: { "/graphql": { target: api, ws: true }, "/healthz": api } },
  test: { include: ["src/**/*.test.ts", "src/**/*.test.tsx"] },
});
