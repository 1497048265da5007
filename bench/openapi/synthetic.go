package main

import (
	"encoding/json"
	"fmt"
)

// synthetic returns an OpenAPI 3.0 document of at least size bytes and its
// number of operations (five per resource), indented
// as GitHub's is, shaped like a real REST description: resources with a
// schema each, list/create/get/update/delete operations, shared parameters
// and responses, and references between schemas including cycles.
func synthetic(size int) ([]byte, int) {
	n := 16
	for {
		doc := syntheticDoc(n)
		if len(doc) >= size {
			return doc, 5 * n
		}
		// Grow in proportion, with a margin so that few rounds are needed.
		n = max(n+1, int(float64(n)*float64(size)/float64(len(doc))*1.02))
	}
}

func syntheticDoc(n int) []byte {
	ref := func(kind, name string) map[string]any {
		return map[string]any{"$ref": "#/components/" + kind + "/" + name}
	}
	schemas := map[string]any{}
	examples := map[string]any{}
	paths := map[string]any{}
	longDescription := "Lists, creates or changes the resource. " +
		"The caller needs read access to the owner, or the `resources` scope for private resources. " +
		"Results are paginated with `per_page` and `page`; the `Link` header names the next page. " +
		"See [the guide](https://docs.example.com/rest/guides/using-pagination) for details."
	for i := range n {
		name := fmt.Sprintf("resource-%d", i)
		simple := fmt.Sprintf("simple-resource-%d", i)
		props := map[string]any{
			"id":         map[string]any{"type": "integer", "example": 42, "description": "Unique identifier of the " + name + "."},
			"node_id":    map[string]any{"type": "string", "example": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5"},
			"name":       map[string]any{"type": "string", "example": "Hello-World", "description": "The name of the " + name + "."},
			"url":        map[string]any{"type": "string", "format": "uri", "example": "https://api.example.com/" + name + "/42"},
			"created_at": map[string]any{"type": "string", "format": "date-time", "example": "2011-01-26T19:01:12Z"},
			"updated_at": map[string]any{"type": "string", "format": "date-time", "nullable": true},
			"state":      map[string]any{"type": "string", "enum": []any{"open", "closed", "archived"}},
			"labels":     map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"owner":      ref("schemas", simple),
			"parent":     ref("schemas", fmt.Sprintf("simple-resource-%d", (i+n-1)%n)),
		}
		example := map[string]any{"id": 42, "name": "Hello-World", "state": "open"}
		for f := range 30 {
			field := fmt.Sprintf("field_%02d", f)
			switch f % 3 {
			case 0:
				props[field] = map[string]any{"type": "string", "description": "The " + field + " of the " + name + ", as shown in the user interface.", "example": "some value"}
				example[field] = "some value of " + field
			case 1:
				props[field] = map[string]any{"type": "integer", "minimum": 0, "description": "How many " + field + " the " + name + " has."}
				example[field] = f * 3
			default:
				props[field] = map[string]any{"type": "boolean", "default": false, "description": "Whether " + field + " is enabled."}
				example[field] = true
			}
		}
		if i%10 == 0 {
			// A sparse chain of full references, which cycles at the end.
			props["template"] = ref("schemas", fmt.Sprintf("resource-%d", (i+10)%n))
		}
		schemas[name] = map[string]any{
			"title": name, "description": "A " + name + ".", "type": "object",
			"properties": props, "required": []any{"id", "node_id", "name", "url"},
		}
		schemas[simple] = map[string]any{"title": "Simple " + name, "type": "object", "properties": map[string]any{
			"id":    map[string]any{"type": "integer"},
			"login": map[string]any{"type": "string", "example": "octocat"},
			"url":   map[string]any{"type": "string", "format": "uri"},
			"type":  map[string]any{"type": "string", "example": "User"},
		}}
		examples[name] = map[string]any{"value": example}
		list := map[string]any{
			"operationId": name + "/list", "summary": "List " + name + "s",
			"description": "Lists every " + name + " the caller can see, newest first. " + longDescription,
			"parameters":  []any{ref("parameters", "per-page"), ref("parameters", "page")},
			"responses": map[string]any{
				"200": map[string]any{"description": "Response", "content": map[string]any{"application/json": map[string]any{
					"schema":   map[string]any{"type": "array", "items": ref("schemas", name)},
					"examples": map[string]any{"default": ref("examples", name)}}}},
				"404": ref("responses", "not_found"),
			},
		}
		create := map[string]any{
			"operationId": name + "/create", "summary": "Create a " + name,
			"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{
				"schema": map[string]any{"type": "object", "required": []any{"name"}, "properties": map[string]any{
					"name": map[string]any{"type": "string"}, "labels": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}}}}},
			"responses": map[string]any{"201": map[string]any{"description": "Created", "content": map[string]any{"application/json": map[string]any{"schema": ref("schemas", name)}}}},
		}
		item := func(verb, summary string, withBody bool) map[string]any {
			op := map[string]any{
				"operationId": name + "/" + verb, "summary": summary + " a " + name, "description": longDescription,
				"responses": map[string]any{"200": map[string]any{"description": "Response", "content": map[string]any{"application/json": map[string]any{"schema": ref("schemas", name)}}}},
			}
			if withBody {
				op["requestBody"] = map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": ref("schemas", name)}}}
			}
			return op
		}
		paths["/"+name+"s"] = map[string]any{"get": list, "post": create}
		paths["/"+name+"s/{id}"] = map[string]any{
			"parameters": []any{map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]any{"type": "integer"}}},
			"get":        item("get", "Get", false),
			"patch":      item("update", "Update", true),
			"delete":     map[string]any{"operationId": name + "/delete", "responses": map[string]any{"204": map[string]any{"description": "Deleted"}}},
		}
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "Synthetic", "version": "1.0.0"},
		"servers": []any{map[string]any{"url": "https://api.example.com"}},
		"paths":   paths,
		"components": map[string]any{
			"schemas":  schemas,
			"examples": examples,
			"parameters": map[string]any{
				"per-page": map[string]any{"name": "per_page", "in": "query", "schema": map[string]any{"type": "integer", "default": 30}},
				"page":     map[string]any{"name": "page", "in": "query", "schema": map[string]any{"type": "integer", "default": 1}},
			},
			"responses": map[string]any{"not_found": map[string]any{"description": "Resource not found", "content": map[string]any{
				"application/json": map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}}}}},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // maps of plain values always encode
	}
	return b
}
