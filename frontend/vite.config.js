// Builds the demo's chat page into the demo project's static files:
// demo_project/static/demo/, with manifest.json naming the hashed files
// (demo_project/views.py reads it to write the <script> and <link> tags).
// `npm run build` after a change (scripts/setup does it when the sources
// changed); Django serves the result at /.
import react from '@vitejs/plugin-react';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  plugins: [react()],
  // Relative: the files work wherever STATIC_URL puts them.
  base: './',
  build: {
    outDir: fileURLToPath(new URL('../demo_project/static/demo/', import.meta.url)),
    emptyOutDir: true,
    manifest: 'manifest.json',
    rolldownOptions: { input: 'src/main.jsx' },
  },
});
