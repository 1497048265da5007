package siem

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// SchemaFacts are what an OCSF schema version says of the classes the
// export uses: each class's required attributes and every attribute's
// type, and the same of the objects. testdata/ocsf-<version>.json holds
// them, extracted from the schema's own files by testdata/ocsf_facts.py.
type SchemaFacts struct {
	Version string                 `json:"ocsf_version"`
	Classes map[string]ClassFacts  `json:"classes"`
	Objects map[string]ObjectFacts `json:"objects"`
}

// ClassFacts are one event class's.
type ClassFacts struct {
	ClassUID    int                 `json:"class_uid"`
	CategoryUID int                 `json:"category_uid"`
	Required    map[string]AttrType `json:"required"`
	Attributes  map[string]AttrType `json:"attributes"`
	Constraints map[string][]string `json:"constraints"`
	ActivityID  map[string]string   `json:"activity_id"`
	TypeUID     map[string]string   `json:"type_uid"`
	SeverityID  map[string]string   `json:"severity_id"`
	StatusID    map[string]string   `json:"status_id"`
}

// ObjectFacts are one object's.
type ObjectFacts struct {
	Required    map[string]AttrType `json:"required"`
	Attributes  map[string]AttrType `json:"attributes"`
	Constraints map[string][]string `json:"constraints"`
}

// AttrType is an attribute's dictionary type: a scalar base type, or
// object_t with the object's name; is_array for a list of them.
type AttrType struct {
	Type    string `json:"type"`
	Object  string `json:"object"`
	IsArray bool   `json:"is_array"`
	Enum    []int  `json:"enum"`
}

// LoadSchemaFacts reads a facts file.
func LoadSchemaFacts(path string) (*SchemaFacts, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f SchemaFacts
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// Check returns what is wrong with one exported event (its JSON) under the
// schema: a class the facts do not know, a required attribute missing, an
// attribute the class or object does not have or of the wrong type, an
// enum value (activity, type, severity, status) the schema does not
// define, an object's required attribute or at_least_one constraint unmet.
func (f *SchemaFacts) Check(event []byte) []string {
	var ev map[string]any
	if err := json.Unmarshal(event, &ev); err != nil {
		return []string{"not a JSON object: " + err.Error()}
	}
	var class *ClassFacts
	var name string
	for n, c := range f.Classes {
		if num(ev["class_uid"]) == float64(c.ClassUID) {
			class, name = &c, n
		}
	}
	if class == nil {
		return []string{fmt.Sprintf("class_uid %v is none of the classes the facts hold", ev["class_uid"])}
	}
	var errs []string
	if num(ev["category_uid"]) != float64(class.CategoryUID) {
		errs = append(errs, fmt.Sprintf("%s: category_uid %v, want %d", name, ev["category_uid"], class.CategoryUID))
	}
	for _, e := range []struct {
		attr   string
		values map[string]string
	}{{"activity_id", class.ActivityID}, {"type_uid", class.TypeUID}, {"severity_id", class.SeverityID}, {"status_id", class.StatusID}} {
		v, ok := ev[e.attr]
		if !ok {
			continue
		}
		key := strconv.FormatFloat(num(v), 'f', -1, 64)
		if _, known := e.values[key]; !known && !(e.attr == "activity_id" && (key == "0" || key == "99")) &&
			!(e.attr == "type_uid" && (key == strconv.Itoa(class.ClassUID*100) || key == strconv.Itoa(class.ClassUID*100+99))) {
			errs = append(errs, fmt.Sprintf("%s: %s %s is not a value the schema defines", name, e.attr, key))
		}
	}
	errs = append(errs, f.checkObject(name, ev, class.Required, class.Attributes, class.Constraints)...)
	return errs
}

func (f *SchemaFacts) checkObject(path string, v map[string]any, required, attrs map[string]AttrType, cons map[string][]string) []string {
	var errs []string
	for k := range required {
		if _, ok := v[k]; !ok {
			errs = append(errs, fmt.Sprintf("%s: required attribute %s missing", path, k))
		}
	}
	for _, group := range []string{"at_least_one", "just_one"} {
		names, ok := cons[group]
		if !ok {
			continue
		}
		n := 0
		for _, k := range names {
			if _, ok := v[k]; ok {
				n++
			}
		}
		if n == 0 || group == "just_one" && n != 1 {
			errs = append(errs, fmt.Sprintf("%s: %s of %v holds %d", path, group, names, n))
		}
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t, ok := attrs[k]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: %s is not an attribute of it", path, k))
			continue
		}
		errs = append(errs, f.checkValue(path+"."+k, v[k], t)...)
	}
	return errs
}

func (f *SchemaFacts) checkValue(path string, v any, t AttrType) []string {
	if t.IsArray {
		list, ok := v.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an array", path)}
		}
		var errs []string
		one := t
		one.IsArray = false
		for i, x := range list {
			errs = append(errs, f.checkValue(fmt.Sprintf("%s[%d]", path, i), x, one)...)
		}
		return errs
	}
	switch t.Type {
	case "object_t":
		obj, ok := v.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object (%s)", path, t.Object)}
		}
		if t.Object == "object" { // unmapped: any object
			return nil
		}
		of, known := f.Objects[t.Object]
		if !known {
			return []string{fmt.Sprintf("%s: object %s is not in the facts", path, t.Object)}
		}
		return f.checkObject(path, obj, of.Required, of.Attributes, of.Constraints)
	case "string_t":
		if _, ok := v.(string); !ok {
			return []string{fmt.Sprintf("%s: want a string", path)}
		}
	case "integer_t", "long_t", "timestamp_t", "port_t":
		n, ok := v.(float64)
		if !ok || n != math.Trunc(n) {
			return []string{fmt.Sprintf("%s: want an integer", path)}
		}
		// The classification attributes are checked against the class
		// (Check); 0 (Unknown) and 99 (Other) are every enum's.
		_, attr, _ := strings.Cut(path, ".")
		if len(t.Enum) > 0 && !slices.Contains(classification, attr) && n != 0 && n != 99 && !slices.Contains(t.Enum, int(n)) {
			return []string{fmt.Sprintf("%s: %v is not a value the schema defines", path, n)}
		}
	case "boolean_t":
		if _, ok := v.(bool); !ok {
			return []string{fmt.Sprintf("%s: want a boolean", path)}
		}
	case "float_t":
		if _, ok := v.(float64); !ok {
			return []string{fmt.Sprintf("%s: want a number", path)}
		}
	}
	return nil
}

// classification are the attributes that place an event in its class.
var classification = []string{"class_uid", "category_uid", "activity_id", "type_uid", "severity_id", "status_id"}

func num(v any) float64 {
	n, _ := v.(float64)
	return n
}
