/**
 * Derives the TypeScript side of the wire from the contract, so nothing is written twice (the
 * writers live in scripts/contract/: one module per generated file, one per kind of output):
 *
 *   protocol/contract/openrpc.json  ──►  protocol/generated/contract.ts  (types, zod validators,
 *                                                                          method and tool tables)
 *                                   ──►  protocol/generated/errors.ts    (error classes, codes,
 *                                                                          close codes)
 *                                   ──►  protocol/generated/tool-schemas.ts (the built-in tools'
 *                                                                          input JSON Schemas)
 *                                   ──►  protocol/mod.ts, between its `<generated-names>`
 *                                        markers: the names of contract.ts and errors.ts, listed
 *                                        (the faces name what they export: no `export *`)
 *
 * `tsx scripts/gen-contract.ts` writes the files; `--check` fails when they drift from the
 * contract (run by `npm run check`, so CI catches a contract edited without regenerating).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { contractModule } from "./contract/contract-module.ts";
import { errorsModule } from "./contract/errors-module.ts";
import { ContractError, SchemaSet } from "./contract/schema.ts";
import { toolSchemasModule } from "./contract/tool-schemas-module.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const argValue = (flag: string): string | undefined => {
  const at = process.argv.indexOf(flag);
  return at >= 0 ? process.argv[at + 1] : undefined;
};
const contractPath = resolve(
  argValue("--contract") ?? join(root, "protocol/contract/openrpc.json"),
);
const outDir = resolve(argValue("--out") ?? join(root, "protocol/generated"));
/** The `/protocol` face, whose generated-names block lists the generated modules' exports. */
const facePath = join(outDir, "../mod.ts");
const BEGIN_NAMES = "// <generated-names>";
const END_NAMES = "// </generated-names>";

/** A generated module's exported names, types and values apart (read from its text). */
function exportedNames(text: string): { types: string[]; values: string[] } {
  const types: string[] = [];
  const values: string[] = [];
  for (
    const [, kind, name] of text.matchAll(/^export (type|interface|const|function|class) (\w+)/gm)
  ) {
    (kind === "type" || kind === "interface" ? types : values).push(name);
  }
  const byName = (a: string, b: string) => a.toLowerCase() < b.toLowerCase() ? -1 : 1;
  return { types: types.sort(byName), values: values.sort(byName) };
}

/**
 * The `/protocol` face with its generated-names block rewritten: one `export type { ... }` and
 * one `export { ... }` per generated module, so that no schema or predicate leaves as a type.
 */
function faceModule(face: string, modules: Record<string, string>): string {
  const begin = face.indexOf(BEGIN_NAMES);
  const end = face.indexOf(END_NAMES);
  if (begin < 0 || end < begin) {
    throw new ContractError(`protocol/mod.ts lacks its ${BEGIN_NAMES} ... ${END_NAMES} block`);
  }
  let block = `${BEGIN_NAMES}\n`;
  for (const [name, text] of Object.entries(modules)) {
    const { types, values } = exportedNames(text);
    if (types.length) block += `export type { ${types.join(", ")} } from "./generated/${name}";\n`;
    if (values.length) block += `export { ${values.join(", ")} } from "./generated/${name}";\n`;
  }
  return face.slice(0, begin) + block + face.slice(end);
}

function formatted(files: Record<string, string>): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), "bma-gen-"));
  try {
    const paths = Object.keys(files).map((name) => {
      const path = join(dir, name);
      writeFileSync(path, files[name]);
      return path;
    });
    const deno = join(root, "node_modules/.bin/deno");
    execFileSync(deno, ["fmt", "--quiet", "--no-config", "--line-width", "100", ...paths], {
      stdio: ["ignore", "inherit", "inherit"],
    });
    return Object.fromEntries(
      Object.keys(files).map((name, i) => [name, readFileSync(paths[i], "utf8")]),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function main(): void {
  const check = process.argv.includes("--check");
  const contract = JSON.parse(readFileSync(contractPath, "utf8"));
  const set = new SchemaSet(contract);
  let files: Record<string, string>;
  let face: string;
  try {
    files = formatted({
      "contract.ts": contractModule(set),
      "errors.ts": errorsModule(contract),
      "tool-schemas.ts": toolSchemasModule(contract),
    });
    const faceText = faceModule(readFileSync(facePath, "utf8"), {
      "contract.ts": files["contract.ts"],
      "errors.ts": files["errors.ts"],
    });
    face = formatted({ "mod.ts": faceText })["mod.ts"];
  } catch (error) {
    if (error instanceof ContractError) {
      console.error(`contract error: ${error.message}`);
      process.exit(1);
    }
    throw error;
  }
  let drift = false;
  for (const [name, text] of Object.entries(files)) {
    const path = join(outDir, name);
    let current = "";
    try {
      current = readFileSync(path, "utf8");
    } catch { /* missing */ }
    if (current === text) continue;
    if (check) {
      console.error(`protocol/generated/${name} is out of date with the contract: run npm run gen`);
      drift = true;
    } else {
      writeFileSync(path, text);
      console.log(`wrote protocol/generated/${name}`);
    }
  }
  if (readFileSync(facePath, "utf8") !== face) {
    if (check) {
      console.error("protocol/mod.ts's generated names are out of date: run npm run gen");
      drift = true;
    } else {
      writeFileSync(facePath, face);
      console.log("wrote protocol/mod.ts (its generated names)");
    }
  }
  if (drift) process.exit(1);
  if (check) console.log("generated files match the contract");
}

main();
