// Builds `keel` unless KEEL_BIN names one, then runs the tests with Node's runner.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.resolve(here, "..");
const repo = path.resolve(pkg, "../..");

if (!process.env.KEEL_BIN) {
  const build = spawnSync("cargo", ["build", "-p", "keel-cli"], { cwd: repo, stdio: "inherit" });
  if (build.status !== 0) {
    console.error("cargo build -p keel-cli failed");
    process.exit(build.status ?? 1);
  }
  const targetDir = process.env.CARGO_TARGET_DIR
    ? path.resolve(repo, process.env.CARGO_TARGET_DIR)
    : path.join(repo, "target");
  process.env.KEEL_BIN = path.join(targetDir, "debug", "keel");
}
process.env.KEEL_BIN = path.resolve(pkg, process.env.KEEL_BIN);
if (!existsSync(process.env.KEEL_BIN)) {
  console.error(`no keel binary at ${process.env.KEEL_BIN}`);
  process.exit(1);
}
const run = spawnSync(process.execPath, ["--test", "--test-concurrency=4", "test/"], {
  cwd: pkg,
  stdio: "inherit",
  env: process.env,
});
process.exit(run.status ?? 1);
