// Checks Argo Workflows templates, given as JSON documents one a line on stdin ({"file", "doc"}):
// against Argo's published schema (@kubernetes-models/argo-workflows: types, enums, required
// fields; that schema does not refuse unknown fields), then what the schema cannot see, as
// `argo lint` does: every template a step or task names is defined, every DAG dependency is a
// task, and every {{inputs.parameters.X}} and {{workflow.parameters.X}} is declared.
// Prints one line per problem on stderr and exits 1 when there is one.
import { createInterface } from "node:readline";
import { WorkflowTemplate } from "@kubernetes-models/argo-workflows/argoproj.io/v1alpha1/WorkflowTemplate";
import { Workflow } from "@kubernetes-models/argo-workflows/argoproj.io/v1alpha1/Workflow";

const kinds = { WorkflowTemplate, Workflow };
// A list where the document should hold one; anything else the schema has already refused.
const list = (value) => (Array.isArray(value) ? value : []);
const problems = [];

function strings(value, found = []) {
  if (typeof value === "string") found.push(value);
  else if (Array.isArray(value)) value.forEach((v) => strings(v, found));
  else if (value && typeof value === "object") Object.values(value).forEach((v) => strings(v, found));
  return found;
}

function check(file, doc) {
  const Kind = kinds[doc.kind];
  if (!Kind) {
    problems.push(`${file}: kind ${doc.kind} is not an Argo workflow or template`);
    return;
  }
  try {
    new Kind(doc).validate();
  } catch (error) {
    problems.push(`${file}: ${error.message}`);
  }
  const spec = doc.spec ?? {};
  const templates = new Map(list(spec.templates).map((t) => [t.name, t]));
  const workflowParameters = new Set(list(spec.arguments?.parameters).map((p) => p.name));
  if (spec.entrypoint && !templates.has(spec.entrypoint)) {
    problems.push(`${file}: the entrypoint ${spec.entrypoint} is not a template`);
  }
  for (const [name, template] of templates) {
    const where = `${file}: template ${name}`;
    const tasks = list(template.dag?.tasks);
    const taskNames = new Set(tasks.map((t) => t.name));
    const steps = list(template.steps).flat();
    for (const step of [...tasks, ...steps]) {
      if (step.template && !templates.has(step.template)) {
        problems.push(`${where}: ${step.name} runs template ${step.template}, which is not defined`);
      }
    }
    for (const task of tasks) {
      for (const dependency of list(task.dependencies)) {
        if (!taskNames.has(dependency)) problems.push(`${where}: ${task.name} depends on ${dependency}, not a task`);
      }
      for (const [, dependency] of String(task.depends ?? "").matchAll(/([A-Za-z0-9-]+)(?:\.[A-Za-z]+)?/g)) {
        if (!["Succeeded", "Failed", "Errored", "Skipped", "Omitted", "Daemoned"].includes(dependency) && !taskNames.has(dependency)) {
          problems.push(`${where}: ${task.name} depends on ${dependency}, not a task`);
        }
      }
    }
    const inputs = new Set(list(template.inputs?.parameters).map((p) => p.name));
    for (const text of strings(template)) {
      for (const [, scope, parameter] of text.matchAll(/\{\{\s*(inputs|workflow)\.parameters\.([A-Za-z0-9_-]+)\s*\}\}/g)) {
        const declared = scope === "inputs" ? inputs : workflowParameters;
        if (!declared.has(parameter)) {
          problems.push(`${where}: {{${scope}.parameters.${parameter}}} is not declared`);
        }
      }
    }
  }
}

let documents = 0;
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const { file, doc } = JSON.parse(line);
  check(file, doc);
  documents += 1;
}
for (const problem of problems) console.error(problem);
if (documents === 0) {
  console.error("check-argo: no document on stdin");
  process.exit(2);
}
process.exit(problems.length ? 1 : 0);
