# Extracts, from the OCSF schema at a tag or commit, the facts the export
# test checks. Run in a clone of ocsf/ocsf-schema:
#   python3 ocsf_facts.py v1.4.0 > ocsf-1.4.0.json
#   python3 ocsf_facts.py <commit> record_integrity,ai_operation > ocsf-1.9.0.json
# The second argument names profiles whose attributes the classes take.
import json, subprocess, sys
R = sys.argv[1]
PROFILES = [p for p in (sys.argv[2] if len(sys.argv) > 2 else "").split(",") if p]
def show(p):
    return json.loads(subprocess.check_output(["git", "show", f"{R}:{p}"]))
ls = subprocess.check_output(["git", "ls-tree", "-r", "--name-only", R]).decode().split()
dic = show("dictionary.json")
dtypes = dic["types"]["attributes"]
dattrs = dic["attributes"]
cats = show("categories.json")["attributes"]
objs = {}
for p in ls:
    if p.startswith("objects/") and p.endswith(".json"):
        o = show(p); objs[o["name"]] = o
evs = {}
for p in ls:
    if p.startswith("events/") and p.endswith(".json"):
        e = show(p); evs[e["name"]] = e
def base_type(t):
    while t in dtypes and "type" in dtypes[t]:
        t = dtypes[t]["type"]
    return t
def merged(defs, name):
    d = defs[name]; chain = [d]
    while d.get("extends") and d["extends"] in defs:
        d = defs[d["extends"]]; chain.append(d)
    attrs, cons = {}, {}
    for d in reversed(chain):
        for k, v in d.get("attributes", {}).items():
            if k == "$include": continue
            attrs.setdefault(k, {}).update(v)
        cons.update(d.get("constraints", {}))
    return attrs, cons, chain
def typeof(k, local=None):
    a = dict(dattrs[k]); t = a["type"]
    if local and "enum" in local and all(i.lstrip("-").isdigit() for i in local["enum"]):
        a["enum"] = local["enum"]  # an object's own enum of the attribute
    if t == "object_t" or t in objs:
        out = {"type": "object_t", "object": a.get("object_type", t)}
    else:
        out = {"type": base_type(t)}
        if "enum" in a: out["enum"] = sorted(int(i) for i in a["enum"])
    if a.get("is_array"): out["is_array"] = True
    return out
def obj_facts(name, seen):
    if name in seen: return
    attrs, cons, _ = merged(objs, name)
    req = {}
    for k, v in sorted(attrs.items()):
        if v.get("requirement") == "required":
            req[k] = typeof(k, v)
            if req[k]["type"] == "object_t": obj_facts(req[k]["object"], seen)
    seen[name] = {"required": req, "constraints": cons, "attributes": {k: typeof(k, attrs[k]) for k in sorted(attrs)}}
profile_attrs = {}
for p in PROFILES:
    profile_attrs.update(show(f"profiles/{p}.json")["attributes"])
out = {"ocsf_version": show("version.json")["version"].removesuffix("-dev"), "profiles": PROFILES, "source": "https://github.com/ocsf/ocsf-schema " + R + " (" + subprocess.check_output(["git","rev-parse",R]).decode().strip() + "): events, dictionary.json, objects",
       "note": "required attributes of each class (base_event, category, class merged; the profiles listed applied), their dictionary types, enums of the classification attributes, and the required attributes and constraints of each object a class requires or the export emits", "classes": {}, "objects": {}}
emit_objs = ["metadata", "product", "actor", "user", "api", "network_endpoint", "http_request", "http_response", "service", "request", "response", "url", "resource_details", "trace"]
if PROFILES:
    emit_objs += ["attestation", "fingerprint", "prev_event", "ai_agent", "ai_model"]
for cname in ["api_activity", "authentication"]:
    attrs, cons, chain = merged(evs, cname)
    for k, v in profile_attrs.items():
        attrs.setdefault(k, {}).update(v)
    e = evs[cname]
    catname = [c.get("category") for c in chain if c.get("category")][0]
    cat_uid = cats[catname]["uid"]
    class_uid = cat_uid * 1000 + e["uid"]
    req = {}
    for k, v in sorted(attrs.items()):
        if v.get("requirement") == "required":
            req[k] = typeof(k, v)
            if req[k]["type"] == "object_t": obj_facts(req[k]["object"], out["objects"])
    acts = {int(i): x["caption"] for i, x in attrs["activity_id"]["enum"].items()}
    sev = {int(i): x["caption"] for i, x in (attrs["severity_id"].get("enum") or dattrs["severity_id"]["enum"]).items()}
    st = {int(i): x["caption"] for i, x in (attrs["status_id"].get("enum") or dattrs["status_id"]["enum"]).items()}
    out["classes"][cname] = {"class_uid": class_uid, "category_uid": cat_uid, "category": catname, "required": req, "constraints": cons,
        "activity_id": acts, "attributes": {k: typeof(k, attrs[k]) for k in sorted(attrs) if k in dattrs}, "type_uid": {str(class_uid*100+int(i)): c for i, c in acts.items()}, "severity_id": sev, "status_id": st}
for o in emit_objs: obj_facts(o, out["objects"])
json.dump(out, sys.stdout, indent=2, sort_keys=True); print()
