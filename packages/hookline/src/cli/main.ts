// The `hookline` command's entry point (bin/hookline.js).
import './program.js';
