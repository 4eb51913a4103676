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
        // Names mangled and spaces gone, but no compression: it rewrote
        // DOMPurify's argument copying (`unapply`) to `[...arguments].slice(1)`,
        // which V8 runs so slowly that it took a fifth of the page's time and
        // rendering a 5 MB answer took 33 s instead of 15 s (docs/web.md).
        minify: { compress: false, mangle: true },
      },
    },
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
