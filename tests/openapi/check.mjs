// The OpenAPI side of test_openapi: reads one JSON job on stdin,
//   {"document": PATH, "examples": [{"schema": "#/paths/...", "body": ..., "where": "API.md:N"}]}
// validates the document against the official OpenAPI 3.1 schema (with the
// validator pinned in package-lock.json) and each example body against the
// schema it points at (JSON Schema 2020-12, the dialect of OpenAPI 3.1).
// Prints one line per failure; exit 1 when any, 0 when all hold.
import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";

const job = JSON.parse(readFileSync(0, "utf8"));
const doc = JSON.parse(readFileSync(job.document, "utf8"));
let failed = 0;

const validator = new Validator();
const res = await validator.validate(doc);
if (!res.valid) {
  failed++;
  console.log("openapi: not a valid OpenAPI document: " + JSON.stringify(res.errors).slice(0, 4000));
} else if (validator.version !== "3.1") {
  failed++;
  console.log("openapi: version " + validator.version + ", want 3.1");
} else {
  console.log("openapi: valid OpenAPI " + validator.version);
}

// The whole document as one schema resource, so that each example's
// pointer and the $refs inside resolve against it. Not strict: the
// document's own keys (openapi, paths, ...) are not schema keywords.
const ajv = new Ajv2020({ strict: false, allErrors: true, formats: { "date-time": true, binary: true } });
ajv.addSchema(doc, "sbx-openapi.json");
for (const ex of job.examples) {
  let check;
  try {
    check = ajv.compile({ $ref: "sbx-openapi.json" + ex.schema });
  } catch (e) {
    failed++;
    console.log(ex.where + ": no schema at " + ex.schema + ": " + e.message);
    continue;
  }
  if (check(ex.body)) {
    console.log(ex.where + ": valid against " + ex.schema);
  } else {
    failed++;
    console.log(ex.where + ": invalid against " + ex.schema + ": " + ajv.errorsText(check.errors));
  }
}
process.exit(failed ? 1 : 0);
