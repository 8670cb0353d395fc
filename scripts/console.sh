#!/bin/sh
# console.sh builds the web console that agentd embeds: console/ type-checked
# with the pinned tsc, its TypeScript and the Preact it uses bundled with the
# pinned esbuild (JSX as console/tsconfig.json says), its CSS minified, into
# internal/console/dist (which git ignores). make console and the image's
# console stage both run it, from the repository's root, after npm ci.
set -eu
dist=internal/console/dist
node_modules/.bin/tsc -p console
node_modules/.bin/esbuild console/main.tsx --bundle --format=esm --target=es2022 --minify --log-level=warning --outfile=$dist/console.js
node_modules/.bin/esbuild console/console.css --minify --log-level=warning --outfile=$dist/console.css
cp console/index.html $dist/
