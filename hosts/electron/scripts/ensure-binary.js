#!/usr/bin/env node
// Makes sure the `keel` binary the tests drive exists and is current.
// With KEEL_BIN set, that binary is used as is; otherwise `cargo build -p keel-cli`
// runs from the repository root (cargo honours CARGO_TARGET_DIR).
"use strict";
const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const bin = process.env.KEEL_BIN;
if (bin) {
  if (!fs.existsSync(bin)) {
    console.error(`KEEL_BIN is set to ${bin}, which does not exist`);
    process.exit(1);
  }
  process.exit(0);
}
const repo = path.resolve(__dirname, "..", "..", "..");
console.error("building keel (cargo build -p keel-cli)");
const r = spawnSync("cargo", ["build", "-p", "keel-cli"], { cwd: repo, stdio: "inherit" });
if (r.error) {
  console.error(`cannot run cargo: ${r.error.message}`);
  process.exit(1);
}
process.exit(r.status === null ? 1 : r.status);
