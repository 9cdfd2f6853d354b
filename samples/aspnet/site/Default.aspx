<%@ Page Language="C#" %>
<script runat="server">
    // A postback form: the click count lives in view state (this page only), the visit count in
    // session state (every page of this browser session).
    protected void Page_Load(object sender, EventArgs e)
    {
        if (!IsPostBack)
        {
            ViewState["clicks"] = 0;
            Session["visits"] = (Session["visits"] == null ? 0 : (int)Session["visits"]) + 1;
        }
        Visits.Text = Session["visits"].ToString();
        Started.Text = (string)Application["started"];
    }

    protected void Greet_Click(object sender, EventArgs e)
    {
        int clicks = (int)ViewState["clicks"] + 1;
        ViewState["clicks"] = clicks;
        Greeting.Text = Server.HtmlEncode("Hello, " + NameBox.Text + "!");
        Clicks.Text = clicks.ToString();
    }
</script>
<!DOCTYPE html>
<html>
<head runat="server">
    <title>Ember Web Forms sample</title>
    <link rel="stylesheet" href="static/site.css" />
</head>
<body>
    <h1>Web Forms on Ember</h1>
    <form id="MainForm" runat="server">
        <p>Your name: <asp:TextBox ID="NameBox" runat="server" />
           <asp:Button ID="GreetButton" runat="server" Text="Greet" OnClick="Greet_Click" /></p>
        <p id="greeting"><asp:Label ID="Greeting" runat="server" /></p>
        <p>Clicks on this page (view state): <asp:Label ID="Clicks" runat="server" Text="0" /></p>
        <p>Visits in this session (session state): <asp:Label ID="Visits" runat="server" /></p>
        <p>Application started: <asp:Label ID="Started" runat="server" /></p>
    </form>
    <p><a href="Hello.ashx?name=Ember">JSON handler</a> · <a href="api/items">Web API</a> · <a href="Boom.aspx">a page that throws</a> ·
       <a href="static/readme.txt">a static file</a></p>
</body>
</html>
