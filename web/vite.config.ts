/**
 * Build of the browser client into the Python package (docs/web.md).
 *
 * The output must be byte-for-byte reproducible, because `.ci/run` rebuilds it
 * and fails when the committed copy differs: file names carry no content hash
 * (the host revalidates them with an ETag instead), nothing embeds a time, and
 * no source map points at this machine's paths.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: process.env.AHP_WEB_OUT_DIR ?? fileURLToPath(new URL('../ahp_server/web/static', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    modulePreload: false,
    assetsInlineLimit: 0,
    reportCompressedSize: false,
    rollupOptions: {
      output: {
        entryFileNames: 'assets/app.js',
        chunkFileNames: 'assets/[name].js',
        assetFileNames: 'assets/[name][extname]',
      },
    },
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
