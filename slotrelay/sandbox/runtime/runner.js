// The in-sandbox runner for node programs: reads {"lang", "code", "inputs", "marker"} from stdin,
// runs the code as a CommonJS module and writes the result trailer on stdout.
//
// The result is what the module's `main(inputs)` returns (awaited when it is a promise), where
// `main` is `module.exports` itself when that is a function, else `module.exports.main`; a module
// without one has result null. The inputs are also visible as the global `INPUTS`.
"use strict";
const fs = require("fs");
const Module = require("module");

function writeTrailer(marker, result) {
  fs.writeSync(1, "\n" + marker + JSON.stringify(result === undefined ? null : result) + "\n");
}

// bwrap passes an open pipe end: a byte on it tells the host the sandbox was set up and the
// runner started (so a bwrap setup failure is not mistaken for the program's own exit 1).
function announceStart() {
  const ready = process.env.SLOTRELAY_READY_FD;
  if (ready) {
    delete process.env.SLOTRELAY_READY_FD;
    fs.writeSync(Number(ready), "1");
    fs.closeSync(Number(ready));
  }
}

async function main() {
  announceStart();
  const request = JSON.parse(fs.readFileSync(0, "utf8"));
  globalThis.INPUTS = request.inputs;
  const program = new Module("/sandbox/main.js", null);
  program.filename = "/sandbox/main.js";
  program.paths = [];
  program._compile(request.code, "/sandbox/main.js");
  const exported = program.exports;
  const entry = typeof exported === "function" ? exported : exported && exported.main;
  let result = null;
  if (typeof entry === "function") {
    result = await entry(request.inputs);
  }
  // Written when the event loop is empty, so callbacks still pending print before it.
  process.on("exit", () => writeTrailer(request.marker, result));
}

main().catch((error) => {
  process.stderr.write((error && error.stack) || String(error));
  process.stderr.write("\n");
  process.exitCode = 1;
});
