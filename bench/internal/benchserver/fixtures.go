package benchserver

// ThingSpec is the OpenAPI document of a tool service with one write,
// putThing; %s is its base URL.
const ThingSpec = `{"openapi": "3.0.3", "info": {"title": "things", "version": "1"}, "servers": [{"url": "%s"}],
 "paths": {"/things/{id}": {"put": {"operationId": "putThing",
   "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
   "responses": {"200": {"description": "ok"}}}}}}`

// ApprovalAgent asks for an approval (waiting up to 24 h), then writes the
// thing its context names through the tool svc (ThingSpec).
const ApprovalAgent = `{"tools": ["svc"],
 "inputs": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
 "steps": [
  {"action": "sign_off", "approve": {"reason": "'write ' + context.id", "timeout": "24h"}},
  {"action": "write", "call": "svc.putThing", "args": {"id": "context.id"}}],
 "outcome": "'written'"}`
