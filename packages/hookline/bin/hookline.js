#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm ci` through the root `prepare` script).
import '../dist/cli/main.js';
