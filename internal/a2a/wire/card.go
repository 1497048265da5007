package wire

// AgentCard describes an agent: where and how to reach it, and its skills.
type AgentCard struct {
	Name                 string            `json:"name"`
	Description          string            `json:"description"`
	SupportedInterfaces  []AgentInterface  `json:"supportedInterfaces"`
	Provider             *AgentProvider    `json:"provider,omitempty"`
	Version              string            `json:"version"`
	DocumentationURL     string            `json:"documentationUrl,omitempty"`
	Capabilities         AgentCapabilities `json:"capabilities"`
	SecuritySchemes      map[string]any    `json:"securitySchemes,omitempty"`
	SecurityRequirements []map[string]any  `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string          `json:"defaultInputModes"`
	DefaultOutputModes   []string          `json:"defaultOutputModes"`
	Skills               []AgentSkill      `json:"skills"`
}

// AgentInterface is one URL of an agent and the binding it speaks there.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// AgentProvider is the organisation that serves an agent.
type AgentProvider struct {
	URL          string `json:"url"`
	Organization string `json:"organization"`
}

// AgentCapabilities are the optional parts of the protocol an agent serves.
type AgentCapabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
}

// AgentSkill is one thing an agent does.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}
